import { judgeIntent } from '../agent/intent.js';
import { agentOf } from '../config/load.js';
import { channelOfScope, replyTargetOf, type ReplyTarget } from '../contracts/message.js';
import { Dispatcher, type ExecuteTurn } from '../dispatch/dispatcher.js';
import { toolControls } from '../tools/controls.js';
import { createTurnExecutor } from '../workspace/execute.js';
import { definePlugin } from './services.js';

/** The classifier is a short call; past this the message is ignored. */
const INTENT_TIMEOUT_MS = 10_000;

/** The dispatcher: admission, lanes and the turn executor, over the inbox the topology chose. */
export const dispatcherPlugin = definePlugin({
  name: 'dispatcher',
  provides: ['dispatcher'],
  inject: [
    'config',
    'logger',
    'metrics',
    'inbox',
    'workspaces',
    'channels',
    'conversations',
    'tracker',
    'approvals',
    'mcp',
    'topology',
    'shutdown',
    'storage',
    'extensions',
    'tracing',
  ],
  start: (ctx) => {
    const config = ctx.use('config');
    const log = ctx.use('logger');
    const channels = ctx.use('channels');
    const workspaces = ctx.use('workspaces');
    const inbox = ctx.use('inbox');
    const metrics = ctx.use('metrics');
    const tracker = ctx.use('tracker');
    const conversations = ctx.use('conversations');
    const topology = ctx.use('topology');
    const channel = (id: string) => channels.get(id);
    // Tracing (src/dispatch/tracing.ts): pass-through unless [observe] otlp_endpoint is set.
    const tracing = ctx.use('tracing');
    const wrap = (execute: ExecuteTurn) => tracing.execute(topology.wrapExecute?.(execute) ?? execute);
    const fenceOf = topology.fenceOf?.bind(topology);
    const hardStop = ctx.use('shutdown').signal;
    const storage = ctx.use('storage');
    // The plugin folders' message_received and message_sent hooks: started beside delivery, never awaited.
    const messageHooks = ctx.use('extensions').messages;
    const onSent = (target: ReplyTarget, text: string) => messageHooks.emit({ phase: 'message_sent', target, text });
    // Single node: a new reply message is sent only while its id can be stored (in cluster
    // mode ids go to PostgreSQL through the cluster's writer instead).
    const beforeSend =
      'remote' in inbox
        ? undefined
        : (signal: AbortSignal) =>
            storage.whenWritable(signal, () => log.warn({ code: storage.health.code }, 'a reply waits for storage before it sends a new message'));
    const dispatcher = new Dispatcher({
      tracker,
      hardStop,
      control: toolControls(ctx.use('approvals'), ctx.use('mcp').running),
      agentOf: (channelId) => {
        const agent = agentOf(config.config, channelId);
        return { agent, max: config.config.agents[agent]?.max_in_flight };
      },
      inbox: tracing.inbox(inbox),
      observers: tracing.observers,
      metrics,
      log,
      limits: () => config.config.limits,
      channel,
      queueModeOf: (scope) => conversations.get(agentOf(config.config, channelOfScope(scope)), scope).queueMode,
      classify: async (msg, recent, signal) => {
        const c = config.config;
        const name = agentOf(c, msg.channelId);
        const agent = c.agents[name];
        const model = c.channels.find((x) => x.id === msg.channelId)?.intent_model ?? agent?.model;
        if (!agent?.base_url || !model) return 'ignore';
        const apiKey = config.secrets.get(`agents.${name}`, 'api_key');
        const lines = recent.map((m) => ({ name: m.sender.name, text: m.text }));
        const v = await judgeIntent(
          { baseUrl: agent.base_url, model, timeoutMs: INTENT_TIMEOUT_MS, ...(apiKey ? { apiKey } : {}) },
          channels.get(msg.channelId)?.adapter.selfName,
          lines,
          signal,
        );
        metrics.intentCalls.inc({ channel: msg.channelId, decision: v.error ? 'failed' : v.decision });
        metrics.intentLatency.observe({ channel: msg.channelId }, v.latencyMs / 1000);
        metrics.intentTokens.inc({ channel: msg.channelId, kind: 'input' }, v.inputTokens);
        metrics.intentTokens.inc({ channel: msg.channelId, kind: 'output' }, v.outputTokens);
        if (v.error) log.warn({ err: v.error, channel: msg.channelId, model }, 'the intent classifier failed; the message is ignored');
        return v.decision;
      },
      notify: async (msg, text) => {
        const ch = channels.get(msg.channelId);
        if (!ch) return;
        // Bounded by the adapter's request timeout; cut when the daemon must exit now.
        const target = replyTargetOf(msg);
        await ch.adapter.send(target, text, { final: true, signal: hardStop });
        onSent(target, text);
      },
      onReceived: (message, verdict) => messageHooks.emit({ phase: 'message_received', message, addressed: message.addressed, verdict }),
      execute: wrap(
        createTurnExecutor({
          channel,
          workspaceFor: (id, msg) => workspaces.byName.get(msg?.synthetic?.agent ?? agentOf(config.config, id)),
          metrics,
          log,
          hardStop,
          tracker,
          ...(fenceOf ? { fenceOf } : {}),
          ...(beforeSend ? { beforeSend } : {}),
          onSent,
        }),
      ),
    });
    ctx.effect(() => dispatcher.shutdown(config.config.daemon.shutdown_grace_ms));
    ctx.provide('dispatcher', dispatcher);
  },
});
