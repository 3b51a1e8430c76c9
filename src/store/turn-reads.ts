import type { ConversationStore } from './conversations.js';
import type { Inbox } from './inbox.js';
import type { SessionStore } from './sessions.js';

/**
 * Each new message's turn starts right after its batch commits, with two reads: the
 * conversation's preferences (its queue mode, when it is queued) and its active session. Run
 * alone each opens and closes a WAL read transaction of its own, which costs more than the
 * lookup; here they ride the batch's transaction, and what they found stands in for the turn's
 * own reads until the event loop next turns (a turn held back, as during `channeld upgrade`,
 * reads again), so a burst of new conversations costs two lookups each instead of two read
 * transactions each.
 */
export function readTurnStartsAlongside(
  inbox: Inbox,
  stores: { sessions: SessionStore; conversations: ConversationStore },
  agentOf: (channelId: string) => string,
): void {
  inbox.readAlongside((stored) => {
    const keys = stored.map(({ msg, scope }) => [agentOf(msg.channelId), scope] as const);
    stores.conversations.warm(keys);
    stores.sessions.warm(keys);
  });
}
