import type { WebClient } from '@slack/web-api';
import type { NativeStream, TransportOptions } from '../../src/contracts/channel.js';
import { ChannelError } from '../../src/contracts/errors.js';
import type { MessageRef } from '../../src/contracts/message.js';
import type { PlatformCall } from '../../src/util/platform-call.js';
import { slackStreamText } from './mentions.js';
import type { SlackRecipient } from './recipients.js';

/** What a native stream needs from the adapter. */
export interface SlackStreamDeps {
  web: WebClient;
  /** A Web API call (cut by its signal or the request timeout, failures classified). */
  call: PlatformCall;
  /** A stream call whose failure counts against native streams (the adapter's strikes). */
  streamCall<T>(what: string, signal: AbortSignal, fn: () => Promise<T>): Promise<T>;
  /** The adapter's chat.update (markdown_text or mrkdwn, mentions escaped). */
  edit(ref: MessageRef, text: string, options: TransportOptions): Promise<void>;
}

/** The message is no longer streaming (Slack ended it, or it expired): it is an ordinary message now. */
function notStreaming(err: unknown): boolean {
  const cause = err instanceof ChannelError ? err.cause : err;
  return (cause as { data?: { error?: string } } | undefined)?.data?.error === 'message_not_in_streaming_state';
}

/**
 * chat.startStream / appendStream / stopStream: Slack appends, so each call sends only what is
 * new. Text that does not continue what Slack has (a tool's progress line gone, the answer cut
 * at a paragraph when it outgrew one message) cannot be appended: the stream is stopped first
 * (Slack's reference: stop it with chat.stopStream when no more text goes; chat.update on a
 * message still streaming is nowhere said to work) and the message goes on as an edited one,
 * without another message. An append Slack fails the same way stops the stream before the reply falls
 * back to editing its message.
 */
export async function openSlackStream(
  d: SlackStreamDeps,
  at: { channel: string; thread_ts: string; recipient: SlackRecipient | undefined },
  options: TransportOptions,
): Promise<NativeStream> {
  const { channel, thread_ts } = at;
  const start = await d.streamCall('chat.startStream', options.signal, () => d.web.chat.startStream({ channel, thread_ts, ...at.recipient }));
  const ref: MessageRef = { chatId: channel, messageId: start.ts!, threadId: thread_ts };
  const ts = ref.messageId;
  /** What Slack has: it moves only once Slack took a call, so the call after a 429 sends the part that one did not. */
  let sent = '';
  /** Until the stream is stopped; after that the message is edited like any other. */
  let streaming = true;
  /** Ends the stream, with the last part of the text; false when it had already ended (that part did not go). */
  const stop = async (signal: AbortSignal, markdown_text?: string): Promise<boolean> => {
    try {
      await d.call('chat.stopStream', signal, () => d.web.chat.stopStream({ channel, ts, ...(markdown_text ? { markdown_text } : {}) }));
      streaming = false;
      return true;
    } catch (err) {
      // Any other failure (a 429) leaves it streaming: the reply's next try stops it again.
      if (!notStreaming(err)) throw err;
      streaming = false;
      return false;
    }
  };
  /** Best effort, before a failure goes to the reply (which then edits the message): no message is left streaming. */
  const stopQuietly = async (err: unknown, signal: AbortSignal) => {
    const rateLimited = err instanceof ChannelError && err.retryAfterMs !== undefined;
    if (!rateLimited && !notStreaming(err) && !signal.aborted) await stop(signal).catch(() => {});
  };
  return {
    ref,
    update: async (raw, o) => {
      if (!streaming) return d.edit(ref, raw, o);
      const text = slackStreamText(raw, false);
      if (!text.startsWith(sent)) {
        await stop(o.signal);
        return d.edit(ref, raw, o);
      }
      const markdown_text = text.slice(sent.length);
      if (!markdown_text) return;
      try {
        await d.streamCall('chat.appendStream', o.signal, () => d.web.chat.appendStream({ channel, ts, markdown_text }));
      } catch (err) {
        await stopQuietly(err, o.signal);
        throw err;
      }
      sent = text;
    },
    finish: async (raw, o) => {
      const text = slackStreamText(raw, true);
      if (streaming && text.startsWith(sent)) {
        if (await stop(o.signal, text.slice(sent.length))) {
          sent = text;
          return ref;
        }
      } else if (streaming) await stop(o.signal);
      // The stream ended without this text (Slack expired it) or could not take it: the message is edited to it.
      await d.edit(ref, raw, o);
      return ref;
    },
  };
}
