import { z } from 'zod';
import { defineAction } from '../action.js';

/** sysexits.h EX_CONFIG, as `channeld run` and `check` use it: `channeld reload && deploy` is honest. */
const EX_CONFIG = 78;

export const reloadAction = defineAction({
  name: 'reload',
  description: "re-read the config and apply the per-channel diff (dry_run: only validate it, in the daemon's environment)",
  input: z.object({ dry_run: z.boolean().optional() }),
  output: z.looseObject({ ok: z.boolean(), generation: z.number(), errors: z.array(z.string()), dry_run: z.boolean().optional(), file: z.string().optional() }),
  readOnly: false,
  httpAliases: ['/reload'],
  handler: ({ dry_run }, { api }) => api.reload(dry_run ? { dryRun: true } : {}),
  exitStatus: (r) => (r.ok ? 0 : EX_CONFIG),
  format: (r) =>
    r.dry_run
      ? r.ok
        ? `ok: the daemon would accept ${r.file ?? 'its config file'} (checked in its own environment; nothing applied)`
        : `the daemon would refuse ${r.file ?? 'its config file'} (checked in its own environment):\n${r.errors.join('\n')}`
      : r.ok
        ? `reloaded: generation ${r.generation}`
        : `refused, the running config stays:\n${r.errors.join('\n')}`,
});
