import { agentOf } from '../config/load.js';
import { type ChannelMessage, replyTargetOf, type ReplyTarget } from '../contracts/message.js';
import { abortedBy, userText } from '../contracts/errors.js';
import { Dispatcher, type ExecuteTurn } from '../dispatch/dispatcher.js';
import { prepareTurn } from '../dispatch/prepare-turn.js';
import { toolControls } from '../tools/controls.js';
import { createTurnExecutor } from '../workspace/execute.js';
import { intentClassifier } from './intent-classifier.js';
import { defineComponent } from './services.js';

/** The dispatcher: admission, lanes and the turn executor, over the topology chosen at composition. */
export const dispatcherComponent = defineComponent({
  name: 'dispatcher',
  provides: ['dispatcher'],
  inject: [
    'config',
    'logger',
    'metrics',
    'workspaces',
    'channels',
    'conversations',
    'tracker',
    'approvals',
    'tool-calls',
    'topology',
    'shutdown',
    'extensions',
    'tracing',
  ],
  start: (ctx) => {
    const config = ctx.use('config');
    const log = ctx.use('logger');
    const channels = ctx.use('channels');
    const workspaces = ctx.use('workspaces');
    const metrics = ctx.use('metrics');
    const tracker = ctx.use('tracker');
    const conversations = ctx.use('conversations');
    const topology = ctx.use('topology');
    const channel = (id: string) => channels.get(id);
    const hardStop = ctx.use('shutdown').signal;
    // The plugin folders' message_received and message_sent hooks: started beside delivery, never awaited.
    const messageHooks = ctx.use('extensions').messages;
    const onSent = (target: ReplyTarget, text: string) => messageHooks.emit({ phase: 'message_sent', target, text });
    const execute = createTurnExecutor({
      channel,
      workspaceFor: (id, msg) => workspaces.byName.get(msg?.synthetic?.agent ?? agentOf(config.config, id)),
      metrics,
      log,
      hardStop,
      tracker,
      fenceOf: (scope) => topology.fenceOf(scope),
      beforeSend: (signal) => topology.state.whenWritable(signal),
      onSent,
    });
    // The conversation's shared state is made current before its turn (a no-op on one node),
    // waiting out a store that cannot answer; a turn stopped meanwhile by a shutdown or a
    // hand-over goes back unfinished (the next start or owner runs it), any other stop (its
    // user, a newer message, its channel reloading) ends it cancelled.
    const prepared: ExecuteTurn = async (job, signal) => {
      // A job has one item at least; its messages share the conversation, so the channel.
      const [first] = job.items;
      let ready = true;
      try {
        if (first) ready = await prepareTurn(() => topology.state.prepare(job.scope, first.message.channelId), signal, log, job.scope);
      } catch (err) {
        // Refused for good (not a store that is away): the user is told, not left in silence.
        log.error({ err, scope: job.scope }, "the conversation's state could not be read: the turn fails");
        await notify(first!.message, userText('TURN_FAILED')).catch(() => {});
        return 'error';
      }
      if (!ready) return hardStop.aborted || abortedBy(signal, 'DAEMON_SHUTTING_DOWN', 'CLUSTER_LEASE_LOST') ? 'unfinished' : 'cancelled';
      return execute(job, signal);
    };
    const notify = async (msg: ChannelMessage, text: string) => {
      const ch = channels.get(msg.channelId);
      if (!ch) return;
      // Bounded by the adapter's request timeout; cut when the daemon must exit now.
      const target = replyTargetOf(msg);
      await ch.adapter.send(target, text, { final: true, signal: hardStop });
      onSent(target, text);
    };
    // Tracing (src/dispatch/tracing.ts): pass-through unless [observe] otlp_endpoint is set.
    const tracing = ctx.use('tracing');
    const dispatcher = new Dispatcher({
      topology: tracing.topology(topology),
      observers: tracing.observers,
      tracker,
      hardStop,
      control: toolControls(ctx.use('approvals'), ctx.use('tool-calls').running),
      agentOf: (channelId) => {
        const agent = agentOf(config.config, channelId);
        return { agent, max: config.config.agents[agent]?.max_in_flight };
      },
      metrics,
      log,
      limits: () => config.config.limits,
      channel,
      queueModeOf: (scope, channelId) => conversations.get(agentOf(config.config, channelId), scope).queueMode,
      classify: intentClassifier(config, channels, metrics, log),
      notify,
      onReceived: (message, verdict) => messageHooks.emit({ phase: 'message_received', message, addressed: message.addressed, verdict }),
      execute: tracing.execute(prepared),
    });
    ctx.effect(() => dispatcher.shutdown(config.config.daemon.shutdown_grace_ms));
    // Background tool calls bring their results back as follow-up turns through the inbox.
    const calls = ctx.use('tool-calls');
    calls.deliver = (msg) => dispatcher.deliver(msg);
    ctx.effect(() => (calls.deliver = undefined));
    ctx.provide('dispatcher', dispatcher);
  },
});
