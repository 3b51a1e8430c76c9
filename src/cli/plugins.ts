import type { LoadedConfig } from '../config/load.js';
import { agentOf, workspaceDirOf } from '../config/load.js';
import type { AgentConfig, ChannelConfig } from '../config/schema.js';
import type { ChannelAdapter } from '../contracts/channel.js';
import { Dispatcher, type DispatchChannel, type ExecuteTurn, type RemoteInbox } from '../dispatch/dispatcher.js';
import { channelOfScope, replyTargetOf } from '../contracts/message.js';
import type { Plugin } from '../kernel/plugin.js';
import { HttpServer } from '../observe/http.js';
import { parseListen } from '../util/http.js';
import { createLogger, type Logger, type LoggerOptions } from '../observe/logger.js';
import { Metrics } from '../observe/metrics.js';
import type { Conversations } from '../store/conversations.js';
import type { Sessions } from '../store/sessions.js';
import type { UsageLedger } from '../store/usage.js';
import type { Inbox } from '../store/inbox.js';
import { Supervisor } from '../supervisor/supervisor.js';
import { TaskTracker } from '../dispatch/tracker.js';
import type { ManagementApi } from '../actions/action.js';
import { builtinActions } from '../actions/builtin/index.js';
import { ActionRegistry } from '../actions/registry.js';
import { createTurnExecutor } from '../workspace/execute.js';
import { Workspace } from '../workspace/workspace.js';
import { ChannelError, CodedError, errorMessage } from '../contracts/errors.js';
import { judgeIntent } from '../agent/intent.js';

import { McpHub } from '../mcp/hub.js';
import { ApprovalCoordinator } from '../tools/approvals.js';
import { toolControls } from '../tools/controls.js';
import { sqliteStorePlugin } from '../store/plugin.js';

/** The classifier is a short call; past this the message is ignored. */
const INTENT_TIMEOUT_MS = 10_000;

/** The live config; reload swaps `loaded` and bumps `generation`. */
export interface ConfigHolder {
  loaded: LoadedConfig;
  generation: number;
}

export type Channels = Map<string, DispatchChannel>;
/** The running workspaces by agent name, and how to build one (reload rebuilds changed agents). */
export interface WorkspaceTable {
  byName: Map<string, Workspace>;
  build(name: string, agent: AgentConfig): Workspace;
}

/** How long a turn waits for its agent's MCP servers' first connection attempt. */
const MCP_READY_WAIT_MS = 30_000;

/** Builds workspaces that read the live config for queue-mode defaults. */
function workspaceBuilder(holder: ConfigHolder, log: Logger, sessions: Sessions, conversations: Conversations, metrics: Metrics, actions: ActionRegistry, tracker: TaskTracker, ledger: UsageLedger, mcp: McpHub) {
  return (name: string, agent: AgentConfig) => {
    const apiKey = holder.loaded.secrets.get(`agents.${name}`, 'api_key');
    return new Workspace({
      name,
      config: agent,
      workspaceDir: workspaceDirOf(holder.loaded.config, name),
      log,
      actions,
      extraTools: () => mcp.tools(name),
      toolsReady: (signal) => mcp.ready(name, MCP_READY_WAIT_MS, signal),
      ...(apiKey ? { apiKey } : {}),
      queuedIn: (scope) => tracker.queuedIn(scope),
      observeTurn: (outcome, seconds) => metrics.turnRuntime.observe({ agent: name, outcome }, seconds),
      onServed: (a, model) => metrics.modelTurns.inc({ agent: a, model }),
      onFailover: (a, model) => {
        metrics.failovers.inc({ agent: a, model });
        log.warn({ agent: a, model }, 'model failed before any text; trying the next one');
      },
      sessions,
      conversations,
      models: () => holder.loaded.config.models,
      maxAttachmentBytes: () => holder.loaded.config.limits.max_attachment_bytes,
      usage: {
        ledger,
        onRecorded: (r) => {
          const labels = { agent: r.agent, model: r.model, channel: r.channel };
          metrics.tokens.inc({ ...labels, type: 'input' }, r.inputTokens);
          metrics.tokens.inc({ ...labels, type: 'output' }, r.outputTokens);
          metrics.tokens.inc({ ...labels, type: 'reasoning' }, r.reasoningTokens);
          metrics.tokens.inc({ ...labels, type: 'cached' }, r.cachedTokens);
          if (r.cost !== null) metrics.cost.inc(labels, r.cost);
        },
      },
      defaultQueueMode: (scope) => {
        const cfg = holder.loaded.config;
        const channelId = channelOfScope(scope);
        return cfg.channels.find((c) => c.id === channelId)?.queue_mode ?? cfg.limits.queue_mode;
      },
    });
  };
}

export interface CorePluginOptions {
  holder: ConfigHolder;
  /** What management actions ask of the daemon. */
  api: ManagementApi;
  logger?: Partial<LoggerOptions>;
  hardStop: AbortSignal;
  /** The environment MCP servers' `headers_env` are read from. */
  env?: NodeJS.ProcessEnv;
  /**
   * Cluster mode (src/cluster/compose.ts): its store replaces the SQLite one and each turn
   * is wrapped to load and commit shared state. Absent: the single-node daemon.
   */
  cluster?: { storePlugin(): Plugin; wrapExecute(execute: ExecuteTurn): ExecuteTurn; fenceOf(scope: string): AbortSignal | undefined };
}

/** The daemon's core, in the order the kernel will find anyway: each injects what it uses. */
export function corePlugins(o: CorePluginOptions): Plugin[] {
  const cfg = () => o.holder.loaded.config;
  return [
    { name: 'config', provides: ['config'], start: (ctx) => ctx.provide('config', o.holder) },
    {
      name: 'logger',
      provides: ['logger'],
      inject: ['config'],
      start: (ctx) => {
        const log = createLogger({ level: cfg().daemon.log_level, secrets: () => o.holder.loaded.secrets.values(), ...o.logger });
        ctx.provide('logger', log);
        ctx.effect(() => log.flush());
      },
    },
    { name: 'metrics', provides: ['metrics'], start: (ctx) => ctx.provide('metrics', new Metrics()) },
    ...(o.cluster ? [o.cluster.storePlugin(), sqliteStorePlugin(cfg, true)] : [sqliteStorePlugin(cfg)]),
    {
      name: 'http',
      provides: ['http'],
      inject: ['config', 'logger'],
      start: async (ctx) => {
        const log = ctx.use<Logger>('logger');
        const { listen } = cfg().http;
        const { host, port } = parseListen(listen);
        // The listen host and allowed_hosts as configured now: a reload applies at once.
        const http = new HttpServer(
          (err) => log.error({ err }, 'HTTP handler failed'),
          () => [parseListen(cfg().http.listen).host, ...cfg().http.allowed_hosts],
        );
        try {
          await http.listen(host, port);
        } catch (err) {
          const code = (err as NodeJS.ErrnoException).code;
          // In use may clear by itself (the previous process still exiting); the rest needs the operator.
          throw new CodedError(code === 'EADDRINUSE' ? 'LISTEN_IN_USE' : 'LISTEN_INVALID', `[http] listen = "${listen}": ${code ?? errorMessage(err)}`, { cause: err });
        }
        ctx.effect(() => http.close());
        ctx.provide('http', http);
      },
    },
    {
      name: 'actions',
      provides: ['actions'],
      inject: ['http', 'config'],
      start: (ctx) => {
        const registry = new ActionRegistry(o.api);
        for (const a of builtinActions) registry.register(a);
        ctx.effect(registry.attachHttp(ctx.use('http'), () => o.holder.loaded.secrets.get('http', 'admin_token')));
        ctx.provide('actions', registry);
      },
    },
    { name: 'channel-table', provides: ['channels'], start: (ctx) => ctx.provide('channels', new Map() as Channels) },
    {
      name: 'mcp',
      provides: ['mcp'],
      inject: ['config', 'logger'],
      start: (ctx) => {
        const hub = new McpHub({ log: ctx.use('logger'), env: o.env ?? process.env, graceMs: () => cfg().daemon.shutdown_grace_ms });
        // Unloaded after the dispatcher: turns have ended before their servers stop.
        ctx.effect(() => hub.stopAll());
        ctx.provide('mcp', hub);
      },
    },
    {
      name: 'approvals',
      provides: ['approvals'],
      inject: ['config', 'logger', 'channels', 'mcp', 'approval-store'],
      start: (ctx) => {
        const channels = ctx.use<Channels>('channels');
        const adapter = (id: string) => {
          const ch = channels.get(id);
          if (!ch) throw new ChannelError('CHANNEL_UNAVAILABLE', `channel "${id}" is not running`);
          return ch.adapter;
        };
        const approvals = new ApprovalCoordinator({
          store: ctx.use('approval-store'),
          log: ctx.use('logger'),
          policy: (agent) => {
            const a = cfg().agents[agent];
            return { approvers: a?.approvers ?? [], timeoutMs: a?.approval_timeout_ms ?? 300000 };
          },
          send: (target, text, buttons, signal) => adapter(target.channelId).send(target, text, { final: true, buttons, signal }),
          edit: (channelId, ref, text) => adapter(channelId).edit(ref, text, { final: true, buttons: [], signal: o.hardStop }),
        });
        const hub = ctx.use<McpHub>('mcp');
        hub.gate = approvals;
        ctx.effect(() => (hub.gate = undefined));
        ctx.provide('approvals', approvals);
      },
    },
    {
      name: 'workspaces',
      provides: ['workspaces'],
      inject: ['config', 'logger', 'sessions', 'conversations', 'metrics', 'actions', 'tracker', 'usage', 'mcp'],
      start: (ctx) => {
        const metrics = ctx.use<Metrics>('metrics');
        const build = workspaceBuilder(o.holder, ctx.use('logger'), ctx.use('sessions'), ctx.use('conversations'), metrics, ctx.use('actions'), ctx.use('tracker'), ctx.use('usage'), ctx.use('mcp'));
        ctx.provide('workspaces', { build, byName: new Map() } satisfies WorkspaceTable);
      },
    },
    {
      name: 'tracker',
      provides: ['tracker'],
      inject: ['config'],
      start: (ctx) => ctx.provide('tracker', new TaskTracker((channelId) => agentOf(cfg(), channelId))),
    },
    {
      name: 'supervisor',
      provides: ['supervisor'],
      inject: ['logger', 'metrics', 'config'],
      start: (ctx) => {
        const sup = new Supervisor(ctx.use('logger'), ctx.use('metrics'));
        ctx.effect(() => sup.stopAll(cfg().daemon.shutdown_grace_ms));
        ctx.provide('supervisor', sup);
      },
    },
    {
      name: 'dispatcher',
      provides: ['dispatcher'],
      inject: ['config', 'logger', 'metrics', 'inbox', 'workspaces', 'channels', 'conversations', 'tracker', 'approvals', 'mcp'],
      start: (ctx) => {
        const log = ctx.use<Logger>('logger');
        const channels = ctx.use<Channels>('channels');
        const workspaces = ctx.use<WorkspaceTable>('workspaces');
        const inbox = ctx.use<Inbox | RemoteInbox>('inbox');
        const metrics = ctx.use<Metrics>('metrics');
        const channel = (id: string) => channels.get(id);
        const tracker = ctx.use<TaskTracker>('tracker');
        const wrap = (execute: ExecuteTurn) => (o.cluster ? o.cluster.wrapExecute(execute) : execute);
        const dispatcher = new Dispatcher({
          tracker,
          control: toolControls(ctx.use('approvals'), ctx.use<McpHub>('mcp').running),
          agentOf: (channelId) => {
            const agent = agentOf(cfg(), channelId);
            return { agent, max: cfg().agents[agent]?.max_in_flight };
          },
          inbox,
          metrics,
          log,
          limits: () => cfg().limits,
          channel,
          queueModeOf: (scope) => {
            const channelId = channelOfScope(scope);
            return ctx.use<Conversations>('conversations').get(agentOf(cfg(), channelId), scope).queueMode;
          },
          classify: async (msg, recent, signal) => {
            const c = cfg();
            const name = agentOf(c, msg.channelId);
            const agent = c.agents[name];
            const model = c.channels.find((x) => x.id === msg.channelId)?.intent_model ?? agent?.model;
            if (!agent?.base_url || !model) return 'ignore';
            const apiKey = o.holder.loaded.secrets.get(`agents.${name}`, 'api_key');
            const lines = recent.map((m) => ({ name: m.sender.name, text: m.text }));
            const v = await judgeIntent({ baseUrl: agent.base_url, model, timeoutMs: INTENT_TIMEOUT_MS, ...(apiKey ? { apiKey } : {}) }, channels.get(msg.channelId)?.adapter.selfName, lines, signal);
            metrics.intentCalls.inc({ channel: msg.channelId, decision: v.error ? 'failed' : v.decision });
            metrics.intentLatency.observe({ channel: msg.channelId }, v.latencyMs / 1000);
            metrics.intentTokens.inc({ channel: msg.channelId, kind: 'input' }, v.inputTokens);
            metrics.intentTokens.inc({ channel: msg.channelId, kind: 'output' }, v.outputTokens);
            if (v.error) log.warn({ err: v.error, channel: msg.channelId, model }, 'the intent classifier failed; the message is ignored');
            return v.decision;
          },
          notify: async (msg, text) => {
            const ch = channels.get(msg.channelId);
            // Bounded by the adapter's request timeout; cut when the daemon must exit now.
            if (ch) await ch.adapter.send(replyTargetOf(msg), text, { final: true, signal: o.hardStop });
          },
          execute: wrap(
            createTurnExecutor({
              channel,
              workspaceFor: (id) => workspaces.byName.get(agentOf(cfg(), id)),
              inbox,
              metrics,
              log,
              hardStop: o.hardStop,
              tracker,
              ...(o.cluster ? { fenceOf: (scope: string) => o.cluster!.fenceOf(scope) } : {}),
            }),
          ),
        });
        ctx.effect(() => dispatcher.shutdown(cfg().daemon.shutdown_grace_ms));
        ctx.provide('dispatcher', dispatcher);
      },
    },
  ];
}

/**
 * One agent's workspace as a plugin: it starts, stops and reloads as a unit. Turns already
 * running keep the workspace they started with; new turns find the new one.
 */
export function workspacePlugin(name: string, agent: AgentConfig): Plugin {
  return {
    name: `workspace:${name}`,
    inject: ['workspaces', 'mcp'],
    start: async (ctx) => {
      // The servers outlive this workspace: a rebuild keeps the unchanged ones running.
      await ctx.use<McpHub>('mcp').sync(name, agent.mcp);
      const table = ctx.use<WorkspaceTable>('workspaces');
      const ws = table.build(name, agent);
      table.byName.set(name, ws);
      ctx.effect(() => {
        ws.dispose();
        if (table.byName.get(name) === ws) table.byName.delete(name);
      });
    },
  };
}

/** Stands in for an adapter that could not be built: every call fails with why. */
function unavailableAdapter(id: string, err: ChannelError): ChannelAdapter {
  const fail = () => Promise.reject(err);
  return {
    id,
    selfId: undefined,
    capabilities: { maxMessageLength: 4000, editsDrafts: false, minEditIntervalMs: 0, nativeStream: false, typing: false },
    listen: fail,
    send: fail,
    edit: fail,
    delete: fail,
    typing: fail,
  };
}

/** Cluster mode: runs a listener only where its lease is (src/cluster/listener-lease.ts). */
export type ListenerGate = (config: ChannelConfig, adapter: ChannelAdapter) => ChannelAdapter;

/**
 * Why an adapter could not be built, as a fatal channel error. A coded error keeps its code,
 * message and cause (a missing token stays CHANNEL_AUTH_FAILED with its one hint); anything
 * else is CHANNEL_UNAVAILABLE. Fatal either way: retrying cannot build it.
 */
export function unbuildable(err: unknown): ChannelError {
  if (err instanceof ChannelError && !err.retryable) return err;
  if (err instanceof CodedError) {
    const same = new ChannelError(err.code, undefined, { cause: err, retryable: false });
    same.message = err.message;
    return same;
  }
  return new ChannelError('CHANNEL_UNAVAILABLE', errorMessage(err), { cause: err, retryable: false });
}

/** Channel ids whose disposal is a removal (turns cancelled) rather than a change (turns finish). */
export type RemovalSet = Set<string>;

/** One channel as a plugin: its adapter joins the channel table and the supervisor. */
export function channelPlugin(config: ChannelConfig, holder: ConfigHolder, removing: RemovalSet, gate?: ListenerGate): Plugin {
  return {
    name: `channel:${config.id}`,
    inject: ['logger', 'http', 'dispatcher', 'supervisor', 'channels', 'metrics'],
    start: async (ctx) => {
      const log = ctx.use<Logger>('logger').child({ channel: config.id });
      const channels = ctx.use<Channels>('channels');
      const supervisor = ctx.use<Supervisor>('supervisor');
      const dispatcher = ctx.use<Dispatcher>('dispatcher');
      let adapter: ChannelAdapter;
      try {
        const factory = await holder.loaded.kinds.of(config).load();
        const metrics = ctx.use<Metrics>('metrics');
        adapter = await factory(config, { http: ctx.use('http'), log, stateDir: holder.loaded.config.daemon.state_dir, maxAttachmentBytes: () => holder.loaded.config.limits.max_attachment_bytes, secret: (base) => holder.loaded.secrets.get(`channels.${config.id}`, base), evicted: (structure, n) => metrics.evictions.inc({ structure }, n) });
      } catch (err) {
        // One channel that cannot be built goes through the usual supervision: its listener
        // fails with a fatal error, so it is parked as failed while the others run.
        adapter = unavailableAdapter(config.id, unbuildable(err));
      }
      if (gate) adapter = gate(config, adapter);
      channels.set(config.id, { config, adapter });
      ctx.effect(() => void channels.delete(config.id));
      supervisor.add({ id: config.id, kind: config.type, adapter, deliver: dispatcher.deliver, backoff: config.backoff, connectTimeoutMs: config.connect_timeout_ms });
      ctx.effect(async () => {
        const grace = holder.loaded.config.daemon.shutdown_grace_ms;
        await dispatcher.settleChannel(config.id, grace, removing.has(config.id));
        await supervisor.remove(config.id, grace);
      });
    },
  };
}
