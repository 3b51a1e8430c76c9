import type { BuiltinProviderName } from '../config/providers.js';
import type { AgentConfig } from '../config/schema.js';
import { CodedError } from '../contracts/errors.js';
import type { AgentRunner } from '../contracts/agent-runner.js';
import { EchoRunner } from './echo.js';
import { LazyOpenAIRunner, warmOpenAI } from './lazy-openai.js';
import type { AttemptFailure } from './openai-compatible.js';

/** What a provider's runners are built from: the agent's config and the hooks its workspace observes. */
export interface RunnerDeps {
  config: AgentConfig;
  apiKey?: string;
  onAttemptFailed?: (f: AttemptFailure) => void;
  onToolCallInvalid?: (tool: string, repaired: boolean) => void;
}

/** A provider's runner for one candidate; `last` is true for the last model of a turn (it may retry on its own). */
export type RunnerFor = (last: boolean) => AgentRunner;

/**
 * How each provider of src/config/providers.ts builds its runners, once per agent. The type
 * makes a provider added there without an entry here fail to compile.
 */
const builders: Record<BuiltinProviderName, (d: RunnerDeps) => RunnerFor> = {
  echo: ({ config }) => {
    const echo = new EchoRunner(config.echo_delay_ms);
    return () => echo;
  },
  'openai-compatible': ({ config, apiKey, onAttemptFailed, onToolCallInvalid }) => {
    warmOpenAI();
    const openai = (retries: number) =>
      new LazyOpenAIRunner({
        baseUrl: config.base_url ?? 'http://127.0.0.1:11434/v1',
        model: config.model ?? 'default',
        ...(apiKey ? { apiKey } : {}),
        ...(config.temperature !== undefined ? { temperature: config.temperature } : {}),
        maxOutputTokens: config.max_output_tokens,
        requestTimeoutMs: config.request_timeout_ms,
        maxSteps: config.max_steps,
        timeZone: config.time_zone,
        maxToolResultChars: config.max_tool_result_chars,
        retries,
        ...(onAttemptFailed ? { onAttemptFailed } : {}),
        ...(onToolCallInvalid ? { onToolCallInvalid } : {}),
      });
    // A model with a successor fails over at once; the last one retries on its own.
    let last: LazyOpenAIRunner | undefined;
    let first: LazyOpenAIRunner | undefined;
    return (isLast) => (isLast ? (last ??= openai(2)) : (first ??= openai(0)));
  },
};

/** The runner factory of `provider`; an unknown provider is AGENT_UNKNOWN_PROVIDER, never a stand-in. */
export function runnersOf(provider: string, deps: RunnerDeps): RunnerFor {
  const build = Object.hasOwn(builders, provider) ? builders[provider as BuiltinProviderName] : undefined;
  if (!build) throw new CodedError('AGENT_UNKNOWN_PROVIDER', `agent model provider "${provider}" has no runner (known: ${Object.keys(builders).join(', ')})`);
  return build(deps);
}
