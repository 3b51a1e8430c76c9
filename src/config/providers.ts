/**
 * The model providers channeld speaks, one entry each: the single list the config schema's
 * `provider` key, the `fallback_models` check and the per-provider rules read. How each builds
 * its runner is in src/agent/providers.ts, keyed by these names (the agent layer sits above
 * config, so the runner classes cannot be named here). A provider missing there is refused
 * with AGENT_UNKNOWN_PROVIDER, never replaced by another.
 */
export interface ProviderRules {
  /** The `provider` value, and the prefix in `fallback_models` ("provider:model"). */
  readonly name: string;
  /** Talks to an OpenAI-style HTTP endpoint at the agent's `base_url` (the intent classifier needs one). */
  readonly endpoint: boolean;
  /** Keys the agent must set when this is its `provider`. */
  readonly requires: readonly ('base_url' | 'model')[];
}

// biome-ignore format: one provider per line, so providers added side by side merge without a conflict
const builtin = [
  { name: 'echo', endpoint: false, requires: [] },
  { name: 'openai-compatible', endpoint: true, requires: ['base_url', 'model'] },
] as const satisfies readonly ProviderRules[];

/** A provider channeld ships. */
export type BuiltinProviderName = (typeof builtin)[number]['name'];

/** In `--help` and "is not one of ..." order. Tests may push a provider of their own (and remove it). */
export const providers: ProviderRules[] = [...builtin];

export function providerNames(): string[] {
  return providers.map((p) => p.name);
}

export function providerRules(name: string): ProviderRules | undefined {
  return providers.find((p) => p.name === name);
}
