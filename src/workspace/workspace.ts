import { EchoRunner } from '../agent/echo.js';
import { OpenAICompatibleRunner } from '../agent/openai-compatible.js';
import type { AgentRunner } from '../agent/runner.js';
import type { AgentConfig, QueueMode } from '../config/schema.js';
import type { Logger } from '../observe/logger.js';
import { registerBuiltinHooks } from '../runtime/builtin-hooks.js';
import { registerBuiltins } from '../runtime/builtins.js';
import { Runtime } from '../runtime/runtime.js';
import type { ConversationStore } from '../store/conversations.js';
import type { SessionStore } from '../store/sessions.js';

export interface WorkspaceOptions {
  name: string;
  config: AgentConfig;
  log: Logger;
  sessions: SessionStore;
  conversations: ConversationStore;
  /** The queue mode of a scope's channel (or [limits]) when the conversation chose none. */
  defaultQueueMode: (scope: string) => QueueMode;
  queuedIn?: (scope: string) => number;
  observeTurn?: (outcome: string, runtimeSeconds: number) => void;
  /** The agent's resolved api_key_env. */
  apiKey?: string;
  /** Builds the provider client from the config (tests and benches substitute it). */
  createRunner?: (config: AgentConfig, apiKey?: string) => AgentRunner;
}

/** One agent: its runtime registries, its session namespace and its provider client. */
export class Workspace {
  readonly name: string;
  readonly config: AgentConfig;
  readonly runtime: Runtime;
  readonly #runner: AgentRunner;

  constructor(o: WorkspaceOptions) {
    this.name = o.name;
    this.config = o.config;
    this.#runner = (o.createRunner ?? createRunner)(o.config, o.apiKey);
    const log = o.log.child({ agent: o.name });
    this.runtime = new Runtime({
      runnerFor: () => this.#runner,
      modesOf: (scope) => {
        const chosen = o.conversations.get(o.name, scope).modes ?? {};
        const active = new Set(this.config.modes.filter((m) => chosen[m] !== false));
        for (const [m, on] of Object.entries(chosen)) if (on) active.add(m);
        return active;
      },
      modelOf: (scope) => o.conversations.get(o.name, scope).model,
      toolAllow: () => this.config.tools,
      onHookError: (phase, hook, err) => log.warn({ err, phase, hook }, 'hook failed; the turn went on'),
    });
    registerBuiltins(this.runtime, {
      agentName: o.name,
      agent: () => this.config,
      sessions: o.sessions,
      conversations: o.conversations,
      defaultQueueMode: o.defaultQueueMode,
      ...(o.queuedIn ? { queuedIn: o.queuedIn } : {}),
    });
    registerBuiltinHooks(this.runtime, {
      agentName: o.name,
      sessions: o.sessions,
      historyBudgetChars: () => this.config.history_budget_chars,
      ...(o.observeTurn ? { observeTurn: o.observeTurn } : {}),
    });
  }
}

/** The provider client an agent's config asks for. */
export function createRunner(config: AgentConfig, apiKey?: string): AgentRunner {
  switch (config.provider) {
    case 'echo':
      return new EchoRunner(config.echo_delay_ms);
    case 'openai-compatible':
      // The config schema guarantees base_url and model for this provider.
      return new OpenAICompatibleRunner({
        baseUrl: config.base_url!,
        model: config.model!,
        ...(apiKey ? { apiKey } : {}),
        ...(config.temperature !== undefined ? { temperature: config.temperature } : {}),
        maxOutputTokens: config.max_output_tokens,
        requestTimeoutMs: config.request_timeout_ms,
        maxSteps: config.max_steps,
        timeZone: config.time_zone,
      });
  }
}
