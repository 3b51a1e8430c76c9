import type { DispatchChannel, ExecuteTurn } from '../dispatch/dispatcher.js';
import { replyTargetOf } from '../dispatch/message.js';
import type { Logger } from '../observe/logger.js';
import type { Metrics } from '../observe/metrics.js';
import type { Inbox } from '../store/inbox.js';
import type { TaskTracker } from '../dispatch/tracker.js';
import { ReplyStream } from '../stream/reply-stream.js';
import type { TurnOutcome } from '../runtime/runtime.js';
import type { Workspace } from './workspace.js';

export interface TurnExecutorDeps {
  channel(id: string): DispatchChannel | undefined;
  /** The workspace of the agent a channel is bound to; undefined (or a throw) ends the turn with an error. */
  workspaceFor(channelId: string): Workspace | undefined;
  inbox: Inbox;
  metrics: Metrics;
  log: Logger;
  /** Aborted when the daemon must exit now: final texts stop retrying. */
  hardStop: AbortSignal;
  tracker?: TaskTracker;
}

const FINAL_TEXT_DEADLINE_MS = 5 * 60_000;

/** Runs one dispatched turn: the workspace's runtime, streamed through a ReplyStream to the channel. */
export function createTurnExecutor(deps: TurnExecutorDeps): ExecuteTurn {
  return async (job, signal) => {
    const first = job.items[0]!;
    const channelId = first.message.channelId;
    const ch = deps.channel(channelId);
    if (!ch) return 'cancelled';
    const started = performance.now();
    // A pino child per turn costs more than the turn's dispatch; bindings are passed per line instead.
    const where = { channel: channelId, scope: job.scope };
    const stream = new ReplyStream({
      transport: ch.adapter,
      capabilities: ch.adapter.capabilities,
      target: replyTargetOf(job.items.at(-1)!.message),
      ...(ch.config.edit_interval_ms !== undefined ? { editIntervalMs: ch.config.edit_interval_ms } : {}),
      streamMode: ch.config.stream_mode,
      showToolProgress: ch.config.show_tool_progress,
      existingRefs: first.replyRefs,
      replyKey: first.message.messageId,
      onRefs: (refs) => {
        for (const it of job.items) deps.inbox.setReplyRefs(it.id, refs);
      },
      // In normal running the final text is retried for minutes; at shutdown hardStop bounds it.
      finalDeadlineMs: FINAL_TEXT_DEADLINE_MS,
      signal: deps.hardStop,
      onRateLimited: () => deps.metrics.rateLimited.inc({ channel: channelId }),
      onFallback: () => deps.metrics.streamFallbacks.inc({ channel: channelId }),
      onError: (err, phase) => deps.log.warn({ ...where, err, phase }, 'reply request failed'),
    });
    let outcome: TurnOutcome;
    try {
      const ws = deps.workspaceFor(channelId);
      if (!ws) throw new Error(`no workspace answers channel "${channelId}"`);
      outcome = await ws.runtime.run({
        message: { ...job.items.at(-1)!.message, text: job.text },
        scope: job.scope,
        ...(ch.adapter.selfName ? { botName: ch.adapter.selfName } : {}),
        signal,
        reply: stream,
        passive: job.passive,
        onModel: (model) => deps.tracker?.setModel(job.id, model),
      });
    } catch (err) {
      // The stream exists, so it must end: otherwise typing refreshes until shutdown and no
      // reply is ever sent. A stream that already ended ignores this.
      deps.log.error({ ...where, err }, 'the turn failed before or outside its runtime');
      stream.push({ type: 'error', code: 'TURN_FAILED', message: 'Something went wrong while answering; please try again.' });
      outcome = { ending: 'error', text: stream.text };
    }
    const result = await stream.finished();
    deps.metrics.draftEdits.observe(result.requests);
    deps.metrics.turnDuration.observe({ channel: channelId, outcome: outcome.ending }, (performance.now() - started) / 1000);
    if (!result.delivered) deps.log.error({ ...where, ending: outcome.ending }, 'the final reply could not be delivered');
    return outcome.ending;
  };
}
