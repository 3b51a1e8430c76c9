import type { DispatchChannel, ExecuteTurn, TurnJob } from '../dispatch/dispatcher.js';
import { type ChannelMessage, type MessageRef, replyTargetOf, type ReplyTarget } from '../contracts/message.js';
import { NEVER_FENCED } from '../contracts/topology.js';
import { abortedBy, CodedError, userText } from '../contracts/errors.js';
import type { Logger } from '../observe/logger.js';
import type { Metrics } from '../observe/metrics.js';
import { startSpan } from '../observe/trace/ambient.js';
import type { TaskTracker } from '../dispatch/tracker.js';
import { FirstVisibleFirst } from '../stream/first-visible.js';
import { ReplyStream } from '../stream/reply-stream.js';
import type { ReplyStreamOptions } from '../stream/reply-options.js';
import { answering } from '../runtime/builtin-hooks.js';
import type { TurnOutcome } from '../runtime/runtime.js';
import type { TurnRequest } from '../contracts/turn.js';
import { sendSpokenReply } from './spoken-reply.js';
import type { Workspace } from './workspace.js';

export interface TurnExecutorDeps {
  channel(id: string): DispatchChannel | undefined;
  /** The workspace of the agent a channel is bound to; undefined (or a throw) ends the turn with an error. */
  workspaceFor(channelId: string, message?: ChannelMessage): Workspace | undefined;
  metrics: Metrics;
  log: Logger;
  /** Aborted when the daemon must exit now: final texts stop retrying. */
  hardStop: AbortSignal;
  tracker?: TaskTracker;
  /**
   * Cluster mode: aborted when this instance may no longer write for the scope (its
   * partition's lease was lost). The reply then stops at once, with no stop marker: the
   * instance that took over continues the same draft.
   */
  fenceOf?(scope: string): AbortSignal | undefined;
  /** Resolves once a new reply message's id can be stored (ReplyStreamOptions.beforeSend). */
  beforeSend?(signal: AbortSignal): Promise<unknown>;
  /** Told about each reply delivered to its chat, with its final text (the message_sent hooks). Must return at once. */
  onSent?(target: ReplyTarget, text: string): void;
}

const FINAL_TEXT_DEADLINE_MS = 5 * 60_000;

/** The turn's signal: hard stop, and the fence when one can abort (one node: hard stop alone, no composite per turn). */
export const fenced = (hardStop: AbortSignal, fence: AbortSignal | undefined) =>
  fence && fence !== NEVER_FENCED ? AbortSignal.any([hardStop, fence]) : hardStop;

/** The turn's message: collected messages are one turn, their attachments go together too (one message as it is). */
function turnMessage(job: Parameters<ExecuteTurn>[0]): ChannelMessage {
  const last = job.items.at(-1)!.message;
  if (job.items.length === 1 && last.text === job.text && last.attachments) return last;
  return { ...last, text: job.text, attachments: job.items.flatMap((i) => i.message.attachments ?? []) };
}

/**
 * One turn's reply options, its callbacks methods of this one object (the stream calls them
 * on it): a turn holds its options for its whole answer, and a closure over the turn per
 * callback, with their context, was kept by every running turn where this is one object.
 */
class TurnReply implements ReplyStreamOptions {
  readonly transport: ReplyStreamOptions['transport'];
  readonly capabilities: ReplyStreamOptions['capabilities'];
  readonly editIntervalMs?: number;
  readonly streamMode: ReplyStreamOptions['streamMode'];
  readonly showToolProgress: boolean;
  readonly existingRefs: ReplyStreamOptions['existingRefs'];
  readonly replyKey: string;
  readonly beforeSend?: ReplyStreamOptions['beforeSend'];
  // In normal running the final text is retried for minutes; at shutdown hardStop bounds it.
  readonly finalDeadlineMs = FINAL_TEXT_DEADLINE_MS;
  readonly signal: AbortSignal;

  constructor(
    private readonly deps: TurnExecutorDeps,
    private readonly job: TurnJob,
    ch: DispatchChannel,
    readonly target: ReplyTarget,
    private readonly where: { channel: string; scope: string },
    private readonly startedMs: number,
    readonly firstVisible: FirstVisibleFirst,
  ) {
    const first = job.items[0]!;
    this.transport = ch.adapter;
    this.capabilities = ch.adapter.capabilities;
    if (ch.config.edit_interval_ms !== undefined) this.editIntervalMs = ch.config.edit_interval_ms;
    this.streamMode = ch.config.stream_mode;
    this.showToolProgress = ch.config.show_tool_progress;
    this.existingRefs = first.replyRefs;
    this.replyKey = first.message.messageId;
    if (deps.beforeSend) this.beforeSend = deps.beforeSend;
    this.signal = fenced(deps.hardStop, deps.fenceOf?.(job.scope));
  }

  /** The item lifecycle records them: a re-run edits these messages instead of sending new ones. */
  onRefs(refs: MessageRef[]): void {
    this.job.replied(refs);
  }

  onRateLimited(): void {
    this.deps.metrics.rateLimited.inc({ channel: this.where.channel });
  }

  onFallback(): void {
    this.deps.metrics.streamFallbacks.inc({ channel: this.where.channel });
  }

  onError(err: unknown, phase: 'draft' | 'final'): void {
    if (err instanceof CodedError && err.code === 'REPLY_STOPPED_BY_USER') {
      // The user's Stop on the platform: nothing more of the answer goes (the reply stream), and a
      // turn still running stops as /stop would stop it, nothing queued dropped; one that ended stays as it ended.
      this.deps.log.info({ ...this.where, turn: this.job.id, phase }, 'the user stopped the answer on the platform');
      if (phase === 'draft') this.job.stop('stopped by its user on the platform');
      return;
    }
    this.deps.log.warn({ ...this.where, err, phase }, 'reply request failed');
  }

  onVisible(): void {
    this.deps.metrics.firstVisible.observe({ channel: this.where.channel }, (performance.now() - this.startedMs) / 1000);
  }
}

/** Runs one dispatched turn: the workspace's runtime, streamed through a ReplyStream to the channel. */
export function createTurnExecutor(deps: TurnExecutorDeps): ExecuteTurn {
  // One per daemon (per instance in a cluster): draft edits yield to replies not yet visible.
  const firstVisible = new FirstVisibleFirst();
  // Each adapter's download, bound once rather than per turn (every running turn kept its copy).
  const downloads = new WeakMap<DispatchChannel['adapter'], TurnRequest['download']>();
  const downloadOf = (adapter: DispatchChannel['adapter']): TurnRequest['download'] => {
    let bound = downloads.get(adapter);
    if (!bound) downloads.set(adapter, (bound = adapter.download?.bind(adapter)));
    return bound;
  };
  return async (job, signal) => {
    const first = job.items[0]!;
    const channelId = first.message.channelId;
    const ch = deps.channel(channelId);
    if (!ch) return 'cancelled';
    const started = performance.now();
    // A pino child per turn costs more than the turn's dispatch; bindings are passed per line instead.
    const where = { channel: channelId, scope: job.scope };
    const target = replyTargetOf(job.items.at(-1)!.message);
    const reply = new TurnReply(deps, job, ch, target, where, started, firstVisible);
    const stream = new ReplyStream(reply);
    let outcome: TurnOutcome;
    let model: string | undefined;
    let agent: string | undefined;
    let speaker: Workspace['speaker'];
    try {
      const ws = deps.workspaceFor(channelId, first.message);
      if (!ws) throw new Error(`no workspace answers channel "${channelId}"`);
      agent = ws.name;
      speaker = ws.speaker;
      // The session hooks learn every item the turn answers: a re-run of any of them finds its row.
      const request = answering(
        {
          message: turnMessage(job),
          ...(ch.adapter.download ? { download: downloadOf(ch.adapter) } : {}),
          scope: job.scope,
          ...(ch.adapter.selfName ? { botName: ch.adapter.selfName } : {}),
          signal,
          reply: stream,
          passive: job.passive,
          onModel: (m) => {
            model = m;
            deps.tracker?.setModel(job.id, m);
          },
          unknownCommands: ch.config.unknown_commands,
        },
        job.items,
      );
      outcome = await ws.runtime.run(request);
    } catch (err) {
      // The stream exists, so it must end: otherwise typing refreshes until shutdown and no
      // reply is ever sent. A stream that already ended ignores this.
      deps.log.error({ ...where, err }, 'the turn failed before or outside its runtime');
      stream.push({ type: 'error', code: 'TURN_FAILED', message: userText('TURN_FAILED') });
      outcome = { ending: 'error', text: stream.text };
    }
    // The final delivery: from the runtime's end until the last reply request settled.
    const delivery = startSpan('deliver', { 'channeld.channel': channelId });
    const result = await stream.finished();
    delivery.set({ 'channeld.reply.delivered': result.delivered, 'channeld.reply.requests': result.requests });
    if (!result.delivered) delivery.fail('REPLY_NOT_DELIVERED');
    delivery.end();
    if (result.delivered && stream.text) deps.onSent?.(target, stream.text);
    // The user spoke: the answer goes as a voice note too, once its text is there.
    if (result.delivered && outcome.ending === 'done' && outcome.spoke && speaker && stream.text.trim())
      await sendSpokenReply({
        adapter: ch.adapter,
        target,
        text: stream.text,
        speaker,
        signal: fenced(deps.hardStop, deps.fenceOf?.(job.scope)),
        log: deps.log,
        where,
        beforeSend: deps.beforeSend,
      });
    deps.metrics.draftEdits.observe(result.requests);
    const durationMs = Math.round(performance.now() - started);
    deps.metrics.turnDuration.observe({ channel: channelId, outcome: outcome.ending }, durationMs / 1000);
    // One line per finished turn at the default level: what an operator greps for first.
    deps.log.info(
      {
        ...where,
        turn: job.id,
        conversation: job.scope,
        agent: agent ?? null,
        model: outcome.command ? null : (model ?? null),
        ...(outcome.command ? { command: outcome.command } : {}),
        duration_ms: durationMs,
        outcome: outcome.ending,
        ...(outcome.errorCode ? { error_code: outcome.errorCode } : {}),
        tokens_in: outcome.usage?.inputTokens ?? 0,
        tokens_out: outcome.usage?.outputTokens ?? 0,
        ...(outcome.usage?.estimated ? { tokens_estimated: true } : {}),
      },
      'turn finished',
    );
    // Cut by a hand-over past the grace (its partition moved): left for the new owner, which
    // runs it again in the same messages, rather than recorded as stopped and acknowledged. A
    // turn that ended on its own before the cut is recorded as it ended: re-running it would
    // answer twice.
    if (result.delivered) return outcome.ending === 'cancelled' && abortedBy(signal, 'CLUSTER_LEASE_LOST') ? 'unfinished' : outcome.ending;
    // Cut by this process's stop (or a lost conversation): left resumable, as a kill -9 leaves
    // it, for the next start or owner, which edits the messages it has. Otherwise the platform
    // refused or stayed away past the deadline: recorded as not answered, not as done.
    const reason = reply.signal.aborted ? 'stopping' : 'refused or past its deadline';
    deps.log.error({ ...where, ending: outcome.ending, reason }, 'the final reply could not be delivered');
    return reply.signal.aborted ? 'unfinished' : 'error';
  };
}
