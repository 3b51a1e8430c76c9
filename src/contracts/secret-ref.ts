import { z } from 'zod';

/** The three ways to name a secret in the config; `resolveSecrets` reads them. */
export const secretKinds = ['env', 'file', 'credential'] as const;

/**
 * The config keys of one secret `base`: `<base>_env`, `<base>_file`, `<base>_credential`,
 * each optional (which ones are needed is the owner's rule). Secrets are references only:
 * an inline `<base> = "..."` is refused.
 */
export function secretRef<const B extends string>(base: B) {
  return {
    [`${base}_env`]: z.string().min(1).optional(),
    [`${base}_file`]: z.string().min(1).optional(),
    [`${base}_credential`]: z.string().min(1).optional(),
  } as { [K in `${B}_${(typeof secretKinds)[number]}`]: z.ZodOptional<z.ZodString> };
}
