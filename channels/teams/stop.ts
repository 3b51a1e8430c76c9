import { ChannelError } from '../../src/contracts/errors.js';
import type { MessageRef, ReplyTarget } from '../../src/contracts/message.js';
import { ConnectorError } from './connector.js';
import { messageIdOf } from './normalize.js';

/** How many answers stopped by their users are remembered (the oldest go first). */
const MAX_REMEMBERED = 5000;

/**
 * Teams' answer to a streaming request once the user pressed Stop: 403 ContentStreamNotAllowed,
 * "Content stream was cancelled by user." (Microsoft's "Stream bot messages" page). The other
 * 403s of that code (not allowed here, exceeded time, already completed, too large) are not a stop.
 */
export function stoppedByUser(err: unknown): boolean {
  const e = err instanceof ChannelError ? err.cause : err;
  // Both spellings: Teams' SDKs have met "canceled" as well as "cancelled".
  return e instanceof ConnectorError && e.status === 403 && e.code === 'ContentStreamNotAllowed' && /cancell?ed by (the )?user/i.test(e.message);
}

function remember<K, V>(map: Map<K, V>, key: K, value: V): void {
  map.delete(key);
  map.set(key, value);
  while (map.size > MAX_REMEMBERED) map.delete(map.keys().next().value!);
}

/**
 * What the Stop button leaves behind. Teams forbids any further change to an answer its user
 * stopped ("bots can't change the content already streamed"), so the answer's message, and the
 * reply to that user message, are left as they are: no update, no delete, no second message.
 */
export class StoppedAnswers {
  /** The user's message an answer was stopped for (the reply target's `replyToMessageId`) → the stopped message. */
  readonly #replies = new Map<string, MessageRef>();
  /** The stopped messages, `chatId|messageId`. */
  readonly #messages = new Set<string>();

  /** The answer in `ref` (a stream's message, answering `target`) was stopped by its user. */
  stopped(target: ReplyTarget, ref: MessageRef): void {
    if (target.replyToMessageId) remember(this.#replies, target.replyToMessageId, ref);
    this.#messages.add(messageIdOf(ref.chatId, ref.messageId));
    while (this.#messages.size > MAX_REMEMBERED) this.#messages.delete(this.#messages.values().next().value!);
  }

  /** The stopped message a reply to `target` would go on in, if its user stopped that reply. */
  stoppedReply(target: ReplyTarget): MessageRef | undefined {
    return target.replyToMessageId ? this.#replies.get(target.replyToMessageId) : undefined;
  }

  isStopped(ref: MessageRef): boolean {
    return this.#messages.has(messageIdOf(ref.chatId, ref.messageId));
  }
}
