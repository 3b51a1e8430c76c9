import type { ChatStartStreamResponse, TaskUpdateChunk, WebClient } from '@slack/web-api';
import type { Logger } from 'pino';
import type { NativeStream, NativeStreamOptions, TransportOptions } from '../../src/contracts/channel.js';
import { ChannelError, errorMessage } from '../../src/contracts/errors.js';
import type { MessageRef } from '../../src/contracts/message.js';
import { settleWithin, sleep } from '../../src/util/abortable.js';
import type { PlatformCall } from '../../src/util/platform-call.js';
import { slackStreamText } from './mentions.js';
import type { SlackRecipient } from './recipients.js';
import { CHUNKS_REFUSED, chunksRefused, closing, progressRefused, remember, taskChunks, unlessChunksRefused, withText } from './tasks.js';

/**
 * Stopping a stream whose reply was cut: how long the request still in flight is waited for,
 * then how long chat.stopStream has under a signal of its own (the reply's has aborted).
 */
export const ABANDONED_STOP_TIMEOUT_MS = 5_000;

/** What a native stream needs from the adapter. */
export interface SlackStreamDeps {
  web: WebClient;
  /** A Web API call (cut by its signal or the request timeout, failures classified). */
  call: PlatformCall;
  /** A stream call whose failure counts against native streams (the adapter's strikes). */
  streamCall<T>(what: string, signal: AbortSignal, fn: () => Promise<T>): Promise<T>;
  /** The adapter's chat.update (markdown_text or mrkdwn, mentions escaped). */
  edit(ref: MessageRef, text: string, options: TransportOptions): Promise<void>;
  log: Logger;
  /** The stops no reply waits for, each until it ends (it never rejects): the adapter's close waits for them, so an exit does not cut them. */
  abandoned: Set<Promise<void>>;
}

/** A 429: the call is tried again later as it was (a stop in particular), so nothing is sent in its place. */
const rateLimited = (err: unknown): boolean => err instanceof ChannelError && err.retryAfterMs !== undefined;

/** The message is no longer streaming (Slack ended it, or it expired): it is an ordinary message now. */
function notStreaming(err: unknown): boolean {
  const cause = err instanceof ChannelError ? err.cause : err;
  return (cause as { data?: { error?: string } } | undefined)?.data?.error === 'message_not_in_streaming_state';
}

/**
 * chat.stopStream as sent, whatever becomes of the call that sent it (a cut call's request may
 * still land): true when Slack took it, false when the stream had already ended; `ended` is
 * told either way. With `tasks`, the text and the tasks go as chunks: CHUNKS_REFUSED where
 * Slack refuses them (still streaming, nothing taken). Any other failure (a 429) leaves it streaming.
 */
function stopRequest(
  d: SlackStreamDeps,
  at: { channel: string; ts: string },
  markdown_text: string | undefined,
  tasks: TaskUpdateChunk[],
  ended: () => void,
): Promise<boolean | typeof CHUNKS_REFUSED> {
  const request = tasks.length
    ? unlessChunksRefused(d.web, d.log, at.channel, d.web.chat.stopStream({ ...at, chunks: withText(markdown_text ?? '', tasks) }))
    : d.web.chat.stopStream({ ...at, ...(markdown_text ? { markdown_text } : {}) });
  return request.then(
    (answer) => {
      if (answer === CHUNKS_REFUSED) return answer;
      ended();
      return true;
    },
    (err: unknown) => {
      if (!notStreaming(err)) throw err;
      ended();
      return false;
    },
  );
}

/**
 * Stops a stream no reply drives any more, in the background (`d.abandoned`). `inFlight` (the
 * last request sent for it) settles first, within ABANDONED_STOP_TIMEOUT_MS, so what it carries
 * stays and a stop already sent is not sent twice; then, while `open()` names the stream as
 * still streaming, `stop` (no text: the message keeps what it shows) under a bound of its own,
 * a 429 waited out within it. A failure is logged, never thrown.
 */
function stopAbandoned(
  d: SlackStreamDeps,
  channel: string,
  inFlight: Promise<unknown>,
  open: () => string | undefined,
  stop: (ts: string, signal: AbortSignal) => Promise<unknown>,
): void {
  const stopping = (async () => {
    await settleWithin(inFlight, ABANDONED_STOP_TIMEOUT_MS);
    let signal: AbortSignal | undefined;
    for (let ts = open(); ts !== undefined; ts = open()) {
      signal ??= AbortSignal.timeout(ABANDONED_STOP_TIMEOUT_MS);
      try {
        await stop(ts, signal);
        return;
      } catch (err) {
        const retryAfterMs = err instanceof ChannelError ? err.retryAfterMs : undefined;
        if (retryAfterMs === undefined || signal.aborted) {
          d.log.warn(
            { chat: channel, ts, err: errorMessage(err) },
            'a Slack stream its reply gave up on could not be stopped; Slack shows it streaming until it expires',
          );
          return;
        }
        await sleep(retryAfterMs, signal);
      }
    }
  })();
  d.abandoned.add(stopping);
  void stopping.then(() => d.abandoned.delete(stopping));
}

/**
 * chat.startStream / appendStream / stopStream: Slack appends, so each call sends only what is
 * new. The reply's tool calls show as tasks (task_update chunks, by the call's id) sent with the
 * text of the same step, so the progress never enters the text and the answer keeps streaming;
 * where Slack refuses chunks (channels/slack/tasks.ts) the channel remembers it and the reply
 * puts the progress line in the text. Text that does not continue what Slack has (a tool's
 * progress line gone there, the answer cut at a paragraph when it outgrew one message) cannot
 * be appended: the stream is stopped first
 * (Slack's reference: stop it with chat.stopStream when no more text goes; chat.update on a
 * message still streaming is nowhere said to work) and the message goes on as an edited one,
 * without another message. An append Slack fails the same way stops the stream before the reply falls
 * back to editing its message, and so does a final stop Slack fails (a 429 aside). A reply cut by its
 * signal (a hard stop, a lost lease) sends nothing more, in flight or later: its stream is stopped
 * here instead, once (stopAbandoned), as is one its reply released (the final text given up on:
 * 429s past its deadline) and one Slack started for a start whose call was cut.
 */
export async function openSlackStream(
  d: SlackStreamDeps,
  at: { channel: string; thread_ts: string; recipient: SlackRecipient | undefined },
  options: TransportOptions,
): Promise<NativeStream> {
  const { channel, thread_ts } = at;
  let starting: Promise<ChatStartStreamResponse> | undefined;
  let start: ChatStartStreamResponse;
  try {
    start = await d.streamCall('chat.startStream', options.signal, () => (starting = d.web.chat.startStream({ channel, thread_ts, ...at.recipient })));
  } catch (err) {
    // Cut (the reply's signal, the request timeout) while Slack may still start it: no reply
    // knows that message, so a stream Slack starts all the same is stopped here.
    let late: string | undefined;
    const answered = starting?.then((r) => void (late = r.ts)).catch(() => {});
    const unstarted = () => void (late = undefined);
    if (answered)
      stopAbandoned(
        d,
        channel,
        answered,
        () => late,
        (ts, s) => d.call('chat.stopStream', s, () => stopRequest(d, { channel, ts }, undefined, [], unstarted)),
      );
    throw err;
  }
  const ref: MessageRef = { chatId: channel, messageId: start.ts!, threadId: thread_ts };
  const ts = ref.messageId;
  /** What Slack has: it moves only once Slack took a call, so the call after a 429 sends the part that one did not. */
  let sent = '';
  /** Until Slack took a stop (even one whose call was cut) or said the stream had ended; after that the message is edited like any other. */
  let streaming = true;
  /** The last append or stop sent: it may land after its call was cut. */
  let last: Promise<unknown> = Promise.resolve();
  let abandoned = false;
  /** The tasks Slack shows in progress on the message (what it took last for each): a stop closes them. */
  const open = new Map<string, TaskUpdateChunk>();
  /** The reply gave up on the stream (its signal aborted, or it released it): nothing of it stops the stream, so this does, once. */
  const abandon = () => {
    options.signal.removeEventListener('abort', abandon);
    if (abandoned || !streaming) return;
    abandoned = true;
    stopAbandoned(
      d,
      channel,
      last,
      () => (streaming ? ts : undefined),
      // Cut or given up on: a tool still shown running did not end as it should.
      (_, signal) => stop(signal, 'error'),
    );
  };
  const ended = () => {
    streaming = false;
    options.signal.removeEventListener('abort', abandon);
  };
  /**
   * Ends the stream, with the last part of the text and the reply's tasks; false when it had
   * already ended (that part did not go). A task still in progress is closed as `closeAs`
   * (channels/slack/tasks.ts closing). Where only those closings went (the reply gave no tasks)
   * and Slack refused them, or failed that stop any other way but a 429, the stop goes again
   * without chunks, once: before there were closings such a stop carried none, and it must not
   * be lost to them (the message would stream until Slack expires it).
   */
  const stop = async (
    signal: AbortSignal,
    closeAs: 'complete' | 'error',
    markdown_text?: string,
    tasks: TaskUpdateChunk[] = [],
  ): Promise<boolean | typeof CHUNKS_REFUSED> => {
    // Any other failure (a 429) leaves it streaming: the reply's next try stops it again.
    const send = (chunks: TaskUpdateChunk[]) => d.call('chat.stopStream', signal, () => (last = stopRequest(d, { channel, ts }, markdown_text, chunks, ended)));
    const chunks = chunksRefused(d.web) ? tasks : closing(open, tasks, closeAs);
    const onlyClosings = !tasks.length && chunks.length > 0;
    let answer: boolean | typeof CHUNKS_REFUSED;
    try {
      answer = await send(chunks);
    } catch (err) {
      // Not a chunk refusal, so the workspace is not remembered as refusing chunks (unlessChunksRefused).
      if (!onlyClosings || rateLimited(err) || signal.aborted) throw err;
      return send([]);
    }
    return answer === CHUNKS_REFUSED && !tasks.length ? send([]) : answer;
  };
  /** The new text, and the tasks with it as chunks (CHUNKS_REFUSED where Slack refuses them: nothing appended). */
  const append = (markdown_text: string, tasks: TaskUpdateChunk[]) =>
    tasks.length
      ? unlessChunksRefused(d.web, d.log, channel, d.web.chat.appendStream({ channel, ts, chunks: withText(markdown_text, tasks) })).then((answer) => {
          // Noted once Slack took it, even for a call that was cut: what the message shows.
          if (answer !== CHUNKS_REFUSED) remember(open, tasks);
          return answer;
        })
      : d.web.chat.appendStream({ channel, ts, markdown_text });
  // The reply's signal, which its later calls carry: it may abort between them, with none in flight.
  options.signal.addEventListener('abort', abandon, { once: true });
  if (options.signal.aborted) abandon();
  /** A call of the reply's that its signal cut (whichever signal it passed) ends the stream here. */
  const unlessCut = async <T>(o: TransportOptions, fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (err) {
      if (o.signal.aborted) abandon();
      throw err;
    }
  };
  /**
   * Best effort, before a failure goes to the reply (which then edits the message): no message is left streaming.
   * A stream Slack says has ended is noted, so a release after it sends nothing. `tasks` (the
   * reply's own states, as the failed stop carried them) go with it, so a call that ended done
   * does not show as failed; only a task left in progress closes as error.
   */
  const stopQuietly = async (err: unknown, signal: AbortSignal, tasks: TaskUpdateChunk[] = []) => {
    if (notStreaming(err)) ended();
    else if (!rateLimited(err) && !signal.aborted) {
      const answer = await stop(signal, 'error', undefined, tasks).catch(() => undefined);
      // Slack refused the reply's chunks: the stop goes again without them (the workspace is remembered as refusing).
      if (answer === CHUNKS_REFUSED) await stop(signal, 'error').catch(() => {});
    }
  };
  /**
   * The tasks of the tool progress the reply gave (NativeStream.showsToolProgress). They go as
   * chunks with the step's text only where Slack takes them and `shows` (an update whose text
   * continues what Slack has; a finish while the stream is open, its stop carrying them):
   * otherwise the reply is told (nothing sent) and puts the progress in the text instead.
   */
  const tasksFor = (o: NativeStreamOptions, shows: boolean): TaskUpdateChunk[] => {
    const tasks = taskChunks(o.progress);
    if (tasks.length && chunksRefused(d.web)) throw progressRefused('this workspace refused task_update chunks');
    if (tasks.length && !shows) throw progressRefused('the message no longer streams, or the text does not continue it');
    return tasks;
  };
  return {
    ref,
    ...(chunksRefused(d.web) ? {} : { showsToolProgress: true as const }),
    update: (raw, o) =>
      unlessCut(o, async () => {
        const text = slackStreamText(raw, false);
        const tasks = tasksFor(o, streaming && text.startsWith(sent));
        if (!streaming) return d.edit(ref, raw, o);
        if (!text.startsWith(sent)) {
          // The message ends while the reply goes on (its progress in the text from here): its tasks end with it.
          await stop(o.signal, 'complete');
          return d.edit(ref, raw, o);
        }
        const markdown_text = text.slice(sent.length);
        if (!markdown_text && !tasks.length) return;
        let answer: unknown;
        try {
          answer = await d.streamCall('chat.appendStream', o.signal, () => (last = append(markdown_text, tasks)));
        } catch (err) {
          await stopQuietly(err, o.signal);
          throw err;
        }
        // Slack took none of it: the reply sends this text again, with the progress in it.
        if (answer === CHUNKS_REFUSED) throw progressRefused('Slack refused task_update chunks');
        sent = text;
      }),
    finish: (raw, o) =>
      unlessCut(o, async () => {
        const text = slackStreamText(raw, true);
        const continues = streaming && text.startsWith(sent);
        // The stop carries the tasks whether or not the text continues (then edited in): the turn's
        // end reports each call as done or failed, and a call still running when the answer outgrew
        // the message ends as complete with it (nothing could update it later).
        const tasks = tasksFor(o, streaming);
        let stopped: boolean | typeof CHUNKS_REFUSED = false;
        try {
          if (streaming) stopped = await stop(o.signal, 'complete', continues ? text.slice(sent.length) : undefined, tasks);
        } catch (err) {
          // A 429 leaves it to the reply's next try; any other failure and the reply edits the message instead.
          await stopQuietly(err, o.signal, tasks);
          throw err;
        }
        // Still streaming, nothing of it taken: the reply ends it again without the tasks.
        if (stopped === CHUNKS_REFUSED) throw progressRefused('Slack refused task_update chunks');
        if (stopped && continues) {
          sent = text;
          return ref;
        }
        // The stream ended without this text (Slack expired it), or it did not continue what Slack had: the message is edited to it.
        await d.edit(ref, raw, o);
        return ref;
      }),
    // Its own bound (stopAbandoned): no reply waits for it, and a stop in flight settles first.
    release: abandon,
  };
}
