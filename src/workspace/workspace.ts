import { FailoverRunner, ModelCooldowns, type Candidate } from '../agent/failover.js';
import { runnersOf, type RunnerFor } from '../agent/providers.js';
import type { AttemptFailure } from '../agent/openai-compatible.js';
import { RepetitionGuardedRunner } from '../agent/repetition.js';
import type { AgentInput, AgentRunner } from '../contracts/agent-runner.js';
import type { AgentConfig, QueueMode } from '../config/schema.js';
import type { Logger } from '../observe/logger.js';
import { registerBuiltinHooks } from '../runtime/builtin-hooks.js';
import { conversationStatus, registerBuiltins, type BuiltinInfo } from '../runtime/builtins.js';
import type { ActionRegistry } from '../actions/registry.js';
import { Runtime } from '../runtime/runtime.js';
import type { Conversations } from '../store/conversations.js';
import type { Sessions } from '../store/sessions.js';
import type { Memories } from '../store/memories.js';
import { registerMemory } from '../memory/memory.js';
import { embedderFor } from '../memory/embed.js';
import type { ModelConfig } from '../config/schema.js';
import { budgetState, registerUsage, type UsageDeps } from './usage-hooks.js';
import { Quotas, type QuotaDeps, type QuotaStanding } from './quotas.js';
import { PromptFiles } from './prompt-files.js';
import { registerAttachments } from './attachments.js';
import { transcriberFor } from '../media/transcriber.js';
import { type Speaker, speakerFor } from '../media/speak.js';
import { registerLinks } from '../media/links.js';
import type { Tool } from '../contracts/tools.js';
import type { TurnContext } from '../contracts/turn.js';
import { registerToolCommands } from '../tools/controls.js';
import { formatAmount } from '../util/money.js';
import { Skills } from './skill-tools.js';

/** The modes of a conversation with none on (shared: callers read it as a ReadonlySet). */
const NO_MODES: ReadonlySet<string> = new Set();

export interface WorkspaceOptions {
  name: string;
  config: AgentConfig;
  log: Logger;
  sessions: Sessions;
  conversations: Conversations;
  /** Where users' memories are kept; with `[agent] memory = true` they are offered and recalled. */
  memories?: Memories;
  /** The queue mode of a scope's channel (or [limits]) when the conversation chose none. */
  defaultQueueMode: (scope: string) => QueueMode;
  queuedIn?: (scope: string) => number;
  observeTurn?: (outcome: string, runtimeSeconds: number) => void;
  /** Told which model served a turn, and when a model failed over. */
  onServed?: (agent: string, model: string) => void;
  onFailover?: (agent: string, from: string) => void;
  /** Told about each tool call whose arguments failed to parse or validate (repaired or sent back to the model). */
  onToolCallInvalid?: (agent: string, tool: string, repaired: boolean) => void;
  /** The agent's resolved api_key_env. */
  apiKey?: string;
  /** Management actions whose slash faces this workspace's commands get. */
  actions?: ActionRegistry;
  /** Where turn usage is stored, the live `[models]` table, and who counts it. */
  usage?: Pick<UsageDeps, 'ledger' | 'onRecorded' | 'spend' | 'live'>;
  /** The live `[models]` table: what each model accepts and costs. */
  models?: () => Record<string, ModelConfig>;
  /** Per-person and per-channel quotas (with `usage.spend`): each channel's limits and admins, and who counts refusals. */
  quotas?: Pick<QuotaDeps, 'channel' | 'onRefused'>;
  /** The live `[limits] max_attachment_bytes`. */
  maxAttachmentBytes?: () => number;
  /** The live `[limits] attachment_timeout_ms`. */
  attachmentTimeoutMs?: () => number;
  /** The agent's folder, where its `prompt_files` are (default `<state_dir>/agents/<name>`). */
  workspaceDir?: string;
  /** Tools that come and go at run time: the agent's MCP servers' tools. */
  extraTools?: () => readonly Tool[];
  /** Wraps each tool offered to a turn: approval, `/stop tool`, background calls (ToolCalls.wrap). */
  wrapTool?: (t: Tool) => Tool;
  /** Resolves once the extra tools' sources have had their first chance to appear. */
  toolsReady?: (signal: AbortSignal) => Promise<void>;
  /** Builds the provider client from the config (tests and benches substitute it). */
  createRunner?: (config: AgentConfig, apiKey?: string) => AgentRunner;
}

/** One agent: its runtime registries, its session namespace and its provider client. */
export class Workspace {
  readonly name: string;
  readonly config: AgentConfig;
  readonly runtime: Runtime;

  /** A conversation as its user sees it. */
  conversationStatus(scope: string): Record<string, string | number> {
    const status = conversationStatus(this.#info, scope, this.runtime.modesOf(scope));
    const budget = this.budget();
    if (budget) status['Budget today'] = `${formatAmount(budget.left)} of ${formatAmount(budget.daily)} left`;
    return status;
  }

  /** The agent's `daily_budget` today: spent and left; undefined without one. */
  budget() {
    return this.#usage ? budgetState(this.#usage) : undefined;
  }

  /** Where one sender stands against the quotas of a channel (/usage); empty without quotas. */
  quotaStanding(channelId: string, senderId: string): Promise<QuotaStanding[]> {
    return this.#quotas ? this.#quotas.standing(channelId, senderId) : Promise.resolve([]);
  }

  /** Reads the prompt files again (config reload); throws when one cannot be read. */
  reloadPromptFiles(): void {
    this.#promptFiles?.reload();
  }

  /** Reads skills_dir again (config reload); an invalid SKILL.md is warned about and left out. */
  reloadSkills(): void {
    this.#skills?.reload();
  }

  /** Stops offering the action slash faces (the workspace is being replaced). */
  dispose(): void {
    this.#detach?.();
  }

  /** For /status: the models, which are cooling down, and which served last. */
  status() {
    return {
      name: this.name,
      provider: this.config.provider,
      // The name /model and the chat's /status show: the echo agent has no model but its provider.
      model: this.config.model ?? this.config.provider,
      fallback_models: this.config.fallback_models,
      cooling: this.cooldowns.snapshot(),
      last_served: this.#lastServed ?? null,
      ...(this.budget() ? { budget: this.budget()! } : {}),
    };
  }
  readonly cooldowns: ModelCooldowns;
  /** `[agent] speech_model`: speaks an answer to a voice note; undefined without one. */
  readonly speaker: Speaker | undefined;
  #lastServed: string | undefined;
  readonly #runner: AgentRunner;
  readonly #info: BuiltinInfo;
  readonly #detach: (() => void) | undefined;
  readonly #usage: UsageDeps | undefined;
  #quotas: Quotas | undefined;
  readonly #promptFiles: PromptFiles | undefined;
  readonly #skills: Skills | undefined;

  constructor(o: WorkspaceOptions) {
    this.name = o.name;
    this.config = o.config;
    this.cooldowns = new ModelCooldowns(() => this.config.cooldown_ms);
    this.speaker = speakerFor(o.config, o.apiKey, o.maxAttachmentBytes ?? (() => 10 * 1024 * 1024));
    const log = o.log.child({ agent: o.name });
    // One warn line per failed model attempt: why it failed, never the key.
    const attemptFailed = (f: AttemptFailure) =>
      log.warn(
        {
          model: f.model,
          base_url_host: f.baseUrlHost,
          status: f.status ?? null,
          code: f.code,
          provider_message: f.message,
          attempt: f.attempt,
          retrying: f.retrying,
        },
        `model attempt failed: ${f.code}${f.status ? ` (HTTP ${f.status})` : ''}: ${f.message}`,
      );
    // One info line per bad tool call: small models do this often, and it is the tuning signal.
    const toolCallInvalid = (tool: string, repaired: boolean) => {
      log.info({ tool, repaired }, repaired ? `repaired the arguments of a call to ${tool}` : `sent a bad call to ${tool} back to the model`);
      o.onToolCallInvalid?.(o.name, tool, repaired);
    };
    const inner = o.createRunner
      ? o.createRunner(o.config, o.apiKey)
      : new FailoverRunner(candidatesFor(o.config, o.apiKey, attemptFailed, toolCallInvalid), this.cooldowns, {
          served: (model) => {
            this.#lastServed = model;
            o.onServed?.(o.name, model);
          },
          failedOver: (from) => o.onFailover?.(o.name, from),
        });
    // Every runner, whatever its provider, is watched for answers that loop.
    this.#runner = new RepetitionGuardedRunner(inner);
    this.runtime = new Runtime({
      runnerFor: () => this.#runner,
      // `[agent] modes` are on by default; the conversation's /mode choices override them.
      // Only registered modes count: a name nothing provides turns nothing on.
      modesOf: (scope) => {
        const choices = o.conversations.get(o.name, scope).modes;
        // Most conversations never chose a mode and most agents turn none on: no set, array
        // and object built for each of their turns.
        if (choices === undefined && this.config.modes.length === 0) return NO_MODES;
        const chosen = choices ?? {};
        const active = new Set(this.config.modes.filter((m) => chosen[m] !== false));
        for (const [m, on] of Object.entries(chosen)) if (on) active.add(m);
        for (const m of active) if (!this.runtime.modes.has(m)) active.delete(m);
        return active;
      },
      features: new Set(o.config.features),
      modelOf: (scope) => o.conversations.get(o.name, scope).model,
      toolAllow: () => this.config.tools,
      sandbox: () => this.config.sandbox,
      ...(o.wrapTool ? { wrapTool: o.wrapTool } : {}),
      ...(o.config.skills_dir !== undefined
        ? { skillsFor: (ctx: TurnContext) => ({ known: this.#skills!.names, loaded: this.#skills!.turnStarts(ctx) }) }
        : {}),
      maxToolResultChars: () => this.config.max_tool_result_chars,
      onHookError: (phase, hook, err) => log.warn({ err, phase, hook }, 'hook failed; the turn went on'),
    });
    this.#info = {
      agentName: o.name,
      agent: () => this.config,
      sessions: o.sessions,
      conversations: o.conversations,
      defaultQueueMode: o.defaultQueueMode,
      statusFromActions: o.actions !== undefined,
      ...(o.queuedIn ? { queuedIn: o.queuedIn } : {}),
    };
    registerBuiltins(this.runtime, this.#info);
    if (o.config.memory && o.memories)
      registerMemory(this.runtime, {
        agentName: o.name,
        agent: () => this.config,
        memories: o.memories,
        embedder: () => embedderFor(this.config, o.apiKey),
        onEmbedError: (err) => log.warn({ err }, 'memory embedding failed; full-text search stands in'),
      });
    const models = o.models ?? (() => ({}));
    registerAttachments(this.runtime, {
      agent: () => this.config,
      models,
      maxBytes: o.maxAttachmentBytes ?? (() => 10 * 1024 * 1024),
      timeoutMs: o.attachmentTimeoutMs ?? (() => 30_000),
      onError: (a, err) => log.warn({ err, attachment: a.id }, 'attachment not downloaded or not transcribed'),
      transcriber: () => transcriberFor(this.config, o.apiKey),
    });
    registerLinks(this.runtime, {
      agent: () => this.config,
      maxBytes: o.maxAttachmentBytes ?? (() => 10 * 1024 * 1024),
      timeoutMs: o.attachmentTimeoutMs ?? (() => 30_000),
      onError: (url, err) => log.warn({ err, url }, 'link not read'),
    });
    if (o.workspaceDir !== undefined && o.config.prompt_files.length) {
      this.#promptFiles = new PromptFiles(
        o.workspaceDir,
        () => this.config.prompt_files,
        (files) => log.warn({ files }, 'prompt files cut to fit the budget'),
      );
      this.#promptFiles.register(this.runtime);
    }
    if (o.config.skills_dir !== undefined) {
      this.#skills = new Skills(
        o.config.skills_dir,
        (p, text) => log.warn({ code: 'SKILL_INVALID', file: p.file, line: p.line }, `skill left out: ${text}`),
        () => this.config.tools,
      );
      this.#skills.register(this.runtime);
    }
    if (o.usage) {
      this.#usage = { agentName: o.name, agent: () => this.config, models, ...o.usage };
      registerUsage(this.runtime, this.#usage);
      const spend = o.usage.spend;
      if (o.quotas && spend) {
        this.#quotas = new Quotas({ agent: () => this.config, models, spend, ledger: o.usage.ledger, ...o.quotas });
        this.#quotas.register(this.runtime);
      }
    }
    if (o.extraTools) this.runtime.tools.addSource(o.extraTools);
    const toolsReady = o.toolsReady;
    // A turn right after start-up (a recovered one) waits for servers still starting.
    // Once they had it, the hook answers at once: a promise would make the rest of its phase wait.
    let toolsWereReady = false;
    if (toolsReady)
      this.runtime.hooks.register({
        phase: 'pre_agent_build',
        name: 'tools_ready',
        run: (ctx) => (toolsWereReady ? undefined : toolsReady(ctx.signal).then(() => void (toolsWereReady = true))),
      });
    registerToolCommands(this.runtime);
    this.#detach = o.actions?.attachSlash(this.runtime.commands, o.name);
    registerBuiltinHooks(this.runtime, {
      agentName: o.name,
      sessions: o.sessions,
      historyBudgetChars: () => this.config.history_budget_chars,
      needsHistory: () => !(this.config.provider === 'echo' && this.config.fallback_models.every((f) => f.startsWith('echo:'))),
      ...(o.observeTurn ? { observeTurn: o.observeTurn } : {}),
    });
  }
}

/**
 * The models a turn may use, in order: the conversation's choice (or the agent's model),
 * then `fallback_models`. openai-compatible models share the agent's endpoint and key.
 * Each provider's runners come from src/agent/providers.ts, built here, once per agent, so an
 * unknown provider is refused (AGENT_UNKNOWN_PROVIDER) when the agent is set up.
 */
export function candidatesFor(
  config: AgentConfig,
  apiKey?: string,
  onAttemptFailed?: (f: AttemptFailure) => void,
  onToolCallInvalid?: (tool: string, repaired: boolean) => void,
): (input: AgentInput) => readonly Candidate[] {
  const deps = { config, ...(apiKey ? { apiKey } : {}), ...(onAttemptFailed ? { onAttemptFailed } : {}), ...(onToolCallInvalid ? { onToolCallInvalid } : {}) };
  const fallbacks = config.fallback_models.map((f) => ({ provider: f.slice(0, f.indexOf(':')), model: f.slice(f.indexOf(':') + 1) }));
  const runners = new Map<string, RunnerFor>();
  for (const provider of [config.provider, ...fallbacks.map((f) => f.provider)]) if (!runners.has(provider)) runners.set(provider, runnersOf(provider, deps));
  const candidate = (provider: string, model: string): Candidate => ({ key: `${provider}:${model}`, model, runner: runners.get(provider) as RunnerFor });
  // The same list for the same model, built once: a turn only reads it.
  const lists = new Map<string, readonly Candidate[]>();
  return (input) => {
    const model = input.model ?? config.model ?? config.provider;
    let list = lists.get(model);
    if (!list) {
      list = [candidate(config.provider, model), ...fallbacks.map((f) => candidate(f.provider, f.model))];
      if (lists.size < 64) lists.set(model, list); // /model may name many: bounded
    }
    return list;
  };
}
