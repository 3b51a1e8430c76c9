import { ChannelError } from '../../src/contracts/errors.js';
import type { ChannelMessage, MessageRef, ReplyTarget } from '../../src/contracts/message.js';
import { ConnectorError } from './connector.js';
import { messageIdOf } from './normalize.js';

/** How many 1:1 conversations' users, and answers stopped by their users, are remembered (the oldest go first). */
const MAX_REMEMBERED = 5000;

export type Sender = ChannelMessage['sender'];

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
 * It also remembers who talks in each 1:1 chat, as the Stop is that user's /stop.
 */
export class UserStops {
  /** A 1:1 conversation's user, from their last message. */
  readonly #users = new Map<string, Sender>();
  /** The user's message an answer was stopped for (the reply target's `replyToMessageId`) → the stopped message. */
  readonly #replies = new Map<string, MessageRef>();
  /** The stopped messages, `chatId|messageId`. */
  readonly #messages = new Set<string>();

  noteUser(conversationId: string, sender: Sender): void {
    if (!sender.isBot) remember(this.#users, conversationId, sender);
  }

  userOf(conversationId: string): Sender | undefined {
    return this.#users.get(conversationId);
  }

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

/**
 * The user's Stop as the /stop they would type in that 1:1 chat: the dispatcher cancels the
 * running turn as for any /stop. Its id names the stream, so a second notice of the same Stop
 * is the same message.
 */
export function stopCommand(channelId: string, conversationId: string, streamId: string, sender: Sender): ChannelMessage {
  return {
    channelId,
    kind: 'teams',
    messageId: messageIdOf(conversationId, `stop-${streamId}`),
    chat: { id: conversationId, type: 'dm' },
    sender,
    text: '/stop',
    attachments: [],
    addressed: true,
    receivedAt: Date.now(),
  };
}

/** A conversation member as the Connector lists it (GET /v3/conversations/{id}/members). */
export function memberAsSender(members: unknown): Sender | undefined {
  if (!Array.isArray(members)) return undefined;
  for (const m of members as Array<Record<string, unknown>>) {
    if (typeof m?.id !== 'string' || m.id.startsWith('28:')) continue;
    // Teams lists the AAD object id as `aadObjectId` (older answers: `objectId`); a message's sender is that id.
    const aad = typeof m.aadObjectId === 'string' ? m.aadObjectId : typeof m.objectId === 'string' ? m.objectId : undefined;
    const id = aad ?? m.id;
    return { id, name: typeof m.name === 'string' && m.name ? m.name : id, isBot: false };
  }
  return undefined;
}
