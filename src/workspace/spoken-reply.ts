import type { ChannelAdapter } from '../contracts/channel.js';
import { errorMessage } from '../contracts/errors.js';
import type { ReplyTarget } from '../contracts/message.js';
import type { Speaker } from '../media/speak.js';
import type { ReplyStreamOptions } from '../stream/reply-options.js';
import type { Logger } from '../observe/logger.js';

/** The longest a spoken answer may take, speech and upload together, after its text was sent. */
const SPOKEN_DEADLINE_MS = 120_000;

/**
 * After the text of an answer to a voice note was delivered: the same answer as a voice note
 * (`[agent] speech_model`). The text is always there already; a kind without `sendFile`, a
 * speech or upload failure, or the deadline leave it at that, each with one log line.
 * Like every new reply message, the voice note waits for `beforeSend` (the store takes
 * writes) after the speech is made: sent during a storage outage, it would be sent again by
 * a process restarted before the store recovers, which re-runs the turn.
 */
export async function sendSpokenReply(o: {
  adapter: Pick<ChannelAdapter, 'sendFile'>;
  target: ReplyTarget;
  text: string;
  speaker: Speaker;
  signal: AbortSignal;
  log: Logger;
  where: Record<string, unknown>;
  /** Resolves once the store takes writes. */
  beforeSend?: ReplyStreamOptions['beforeSend'];
}): Promise<boolean> {
  if (!o.adapter.sendFile) {
    o.log.info({ ...o.where }, 'spoken reply not sent: this channel kind cannot send files; the answer went as text only');
    return false;
  }
  const signal = AbortSignal.any([o.signal, AbortSignal.timeout(SPOKEN_DEADLINE_MS)]);
  try {
    const audio = await o.speaker(o.text, signal);
    await o.beforeSend?.(signal);
    signal.throwIfAborted();
    await o.adapter.sendFile(o.target, { ...audio, voice: true }, { signal });
    o.log.info({ ...o.where, bytes: audio.bytes.length, mime: audio.mime }, 'spoken reply sent');
    return true;
  } catch (err) {
    o.log.warn({ ...o.where, err, reason: errorMessage(err) }, 'spoken reply not sent; the answer went as text only');
    return false;
  }
}
