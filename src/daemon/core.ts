import { builtinActions } from '../actions/builtin/index.js';
import { ActionRegistry } from '../actions/registry.js';
import { agentOf } from '../config/load.js';
import { ChannelError, CodedError, errorMessage } from '../contracts/errors.js';
import { TaskTracker } from '../dispatch/tracker.js';
import { McpHub } from '../mcp/hub.js';
import { HttpServer } from '../observe/http-server.js';
import { parseListen } from '../util/http-helpers.js';
import { createLogger, type LoggerOptions } from '../observe/logger.js';
import { MemoryTrimmer } from '../observe/memory-trim.js';
import { collection, parseV8Flags, V8_FLAGS_ENV } from '../observe/v8-flags.js';
import { Metrics } from '../observe/metrics.js';
import { Supervisor } from '../supervisor/supervisor.js';
import { ApprovalCoordinator } from '../tools/approvals.js';
import { ToolCalls } from '../tools/tool-calls.js';
import type { LiveConfig } from './config-service.js';
import { Extensions, type PluginFailure } from './extensions.js';
import { ManagementSlot } from './management.js';
import { ChannelTable, defineComponent, type DaemonComponent, type HardStop } from './services.js';

/** The values the composition root itself owns, published as services. */
export function rootComponents(config: LiveConfig, shutdown: HardStop): DaemonComponent[] {
  return [
    defineComponent({ name: 'config', provides: ['config'], start: (ctx) => ctx.provide('config', config) }),
    defineComponent({ name: 'shutdown', provides: ['shutdown'], start: (ctx) => ctx.provide('shutdown', shutdown) }),
  ];
}

/** The logger at `[daemon] log_level`; secrets in force are redacted from every line. */
export function loggerComponent(options: Partial<LoggerOptions> = {}): DaemonComponent {
  return defineComponent({
    name: 'logger',
    provides: ['logger'],
    inject: ['config'],
    start: (ctx) => {
      const config = ctx.use('config');
      const log = createLogger({ level: config.config.daemon.log_level, secrets: () => config.secrets.values(), ...options });
      ctx.provide('logger', log);
      ctx.effect(() => log.flush());
    },
  });
}

export const metricsComponent = defineComponent({ name: 'metrics', provides: ['metrics'], start: (ctx) => ctx.provide('metrics', new Metrics()) });

export const httpComponent = defineComponent({
  name: 'http',
  provides: ['http'],
  inject: ['config', 'logger'],
  start: async (ctx) => {
    const log = ctx.use('logger');
    const config = ctx.use('config');
    const { listen } = config.config.http;
    const { host, port } = parseListen(listen);
    // The listen host and allowed_hosts as configured now: a reload applies at once.
    const http = new HttpServer(
      (err) => log.error({ err }, 'HTTP handler failed'),
      () => [parseListen(config.config.http.listen).host, ...config.config.http.allowed_hosts],
    );
    try {
      await http.listen(host, port);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EADDRINUSE') throw new CodedError('LISTEN_IN_USE', `${listen} is already in use by another process ([http] listen)`, { cause: err });
      throw new CodedError('LISTEN_INVALID', `[http] listen = "${listen}": ${code ?? errorMessage(err)}`, { cause: err });
    }
    ctx.effect(() => http.close());
    ctx.provide('http', http);
  },
});

/**
 * The management actions and their HTTP faces. The registry runs actions against the
 * `management` slot, which the management component binds once the services it reads run
 * (they include the workspaces, which in turn take the actions' slash faces).
 */
export const actionsComponent = defineComponent({
  name: 'actions',
  provides: ['actions', 'management'],
  inject: ['http', 'config'],
  start: (ctx) => {
    const config = ctx.use('config');
    const slot = new ManagementSlot();
    const registry = new ActionRegistry(slot);
    for (const a of builtinActions) registry.register(a);
    ctx.effect(registry.attachHttp(ctx.use('http'), () => config.secrets.get('http', 'admin_token')));
    ctx.provide('actions', registry);
    ctx.provide('management', slot);
  },
});

export const channelTableComponent = defineComponent({
  name: 'channel-table',
  provides: ['channels'],
  start: (ctx) => ctx.provide('channels', new ChannelTable()),
});

export const mcpComponent = defineComponent({
  name: 'mcp',
  provides: ['mcp'],
  inject: ['config', 'logger'],
  start: (ctx) => {
    const config = ctx.use('config');
    const hub = new McpHub({ log: ctx.use('logger'), env: config.env, graceMs: () => config.config.daemon.shutdown_grace_ms });
    // Unloaded after the dispatcher: turns have ended before their servers stop.
    ctx.effect(() => hub.stopAll());
    ctx.provide('mcp', hub);
  },
});

export const toolCallsComponent = defineComponent({
  name: 'tool-calls',
  provides: ['tool-calls'],
  inject: ['config', 'logger'],
  start: (ctx) => {
    const config = ctx.use('config');
    const calls = new ToolCalls({ log: ctx.use('logger'), agent: (name) => config.config.agents[name] });
    // Unloaded after the dispatcher: calls still in the background are cancelled.
    ctx.effect(() => calls.close());
    ctx.provide('tool-calls', calls);
  },
});

export const approvalsComponent = defineComponent({
  name: 'approvals',
  provides: ['approvals'],
  inject: ['config', 'logger', 'channels', 'tool-calls', 'approval-store', 'shutdown'],
  start: (ctx) => {
    const config = ctx.use('config');
    const hardStop = ctx.use('shutdown').signal;
    const channels = ctx.use('channels');
    const adapter = (id: string) => {
      const ch = channels.get(id);
      if (!ch) throw new ChannelError('CHANNEL_NOT_RUNNING', `channel "${id}" is not running`);
      return ch.adapter;
    };
    const approvals = new ApprovalCoordinator({
      store: ctx.use('approval-store'),
      log: ctx.use('logger'),
      policy: (agent) => {
        const a = config.config.agents[agent];
        return { approvers: a?.approvers ?? [], timeoutMs: a?.approval_timeout_ms ?? 300000 };
      },
      send: (target, text, buttons, signal) => adapter(target.channelId).send(target, text, { final: true, buttons, signal }),
      edit: (channelId, ref, text) => adapter(channelId).edit(ref, text, { final: true, buttons: [], signal: hardStop }),
    });
    const calls = ctx.use('tool-calls');
    calls.gate = approvals;
    ctx.effect(() => (calls.gate = undefined));
    ctx.provide('approvals', approvals);
  },
});

export const trackerComponent = defineComponent({
  name: 'tracker',
  provides: ['tracker'],
  inject: ['config'],
  start: (ctx) => {
    const config = ctx.use('config');
    ctx.provide('tracker', new TaskTracker((channelId) => agentOf(config.config, channelId)));
  },
});

export const supervisorComponent = defineComponent({
  name: 'supervisor',
  provides: ['supervisor'],
  inject: ['logger', 'metrics', 'config'],
  start: (ctx) => {
    const config = ctx.use('config');
    const sup = new Supervisor(ctx.use('logger'), ctx.use('metrics'));
    ctx.effect(() => sup.stopAll(config.config.daemon.shutdown_grace_ms));
    ctx.provide('supervisor', sup);
  },
});

export const extensionsComponent = defineComponent({
  name: 'extensions',
  provides: ['extensions'],
  inject: ['logger', 'metrics'],
  start: (ctx) => {
    const log = ctx.use('logger');
    const metrics = ctx.use('metrics');
    // One error line per throw, naming where it came from (the logger scrubs secrets from it).
    const onError = (f: PluginFailure) => {
      log.error(
        { plugin: f.plugin, folder: f.source, agent: f.agent ?? null, kind: f.kind, name: f.name, phase: f.phase, err: f.err },
        `plugin ${f.plugin}: ${f.kind} ${f.name} threw in ${f.phase}: ${errorMessage(f.err)}`,
      );
      metrics.pluginErrors.inc({ plugin: f.plugin, kind: f.kind });
    };
    ctx.provide('extensions', new Extensions(onError));
  },
});

/**
 * Gives freed memory back to the system after bursts (src/observe/memory-trim.ts); off without
 * `--expose-gc`, on node's command line or in CHANNELD_V8_FLAGS (src/observe/v8-flags.ts).
 */
export const memoryTrimComponent = defineComponent({
  name: 'memory-trim',
  inject: ['config', 'logger', 'metrics', 'tracker'],
  start: (ctx) => {
    const log = ctx.use('logger');
    const metrics = ctx.use('metrics');
    const tracker = ctx.use('tracker');
    const trimmer = new MemoryTrimmer({
      activity: { pending: () => tracker.size, events: () => tracker.events },
      gc: collection(parseV8Flags(ctx.use('config').env[V8_FLAGS_ENV])),
      onTrim: (t) => {
        metrics.memoryTrims.observe({ reason: t.reason }, t.durationMs / 1000);
        const mb = (bytes: number) => Math.round(bytes / 2 ** 20);
        log.debug(
          { reason: t.reason, rss_before_mb: mb(t.rssBeforeBytes), rss_after_mb: mb(t.rssAfterBytes), duration_ms: Math.round(t.durationMs) },
          'memory trimmed',
        );
      },
    });
    if (!trimmer.enabled) log.debug(`memory trim off: --expose-gc is neither on node's command line nor in ${V8_FLAGS_ENV}`);
    trimmer.start();
    ctx.effect(() => trimmer.stop());
  },
});
