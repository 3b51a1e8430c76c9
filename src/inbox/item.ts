import type { ChannelMessage, MessageRef } from '../contracts/message.js';

/**
 * The states of an inbox item as they are persisted (the SQLite `inbox.state` column, the
 * cluster's `items.state`):
 *
 * - `pending`: stored, not answered yet.
 * - `running`: its turn runs. Persisted with the first reply ref only: until then the row
 *   says pending, one commit fewer per turn, and recovery treats both alike.
 * - `done`: answered (or a control command, stored as done when it arrives).
 * - `failed`: its turn failed or was cancelled, or it was dropped from its queue.
 * - `refused`: the queue was full (the sender got the busy reply).
 */
export type InboxState = 'pending' | 'running' | 'done' | 'failed' | 'refused';

/**
 * Where an item is in this process: a persisted state, or `queued` (waiting in a lane;
 * persisted as pending). Only src/inbox/lifecycle.ts moves an item from one to another.
 */
export type ItemState = InboxState | 'queued';

export interface InboxItem {
  id: number;
  scope: string;
  message: ChannelMessage;
  state: ItemState;
  /** The platform messages that answered (or are answering) this item. */
  replyRefs: MessageRef[];
}

/** What happens to an item; each event is one move of the lifecycle. */
export type ItemEvent = 'queue' | 'refuse' | 'start' | 'reply' | 'finish' | 'drop' | 'release';

/**
 * Every move an item may make: the states an event may happen in, and where it leads.
 * `reply` keeps a running item running (its reply refs are recorded); `release` hands a
 * queued item to another cluster instance (it stays pending in the shared inbox). Final
 * states (done, failed, refused) are the `from` of no event.
 */
export const TRANSITIONS: Readonly<Record<ItemEvent, { readonly from: readonly ItemState[]; readonly to: readonly ItemState[] }>> = {
  queue: { from: ['pending'], to: ['queued'] },
  refuse: { from: ['pending'], to: ['refused'] },
  start: { from: ['queued'], to: ['running'] },
  reply: { from: ['running'], to: ['running'] },
  finish: { from: ['running'], to: ['done', 'failed'] },
  drop: { from: ['queued'], to: ['failed'] },
  release: { from: ['queued'], to: ['pending'] },
};

/** Persisted states a new process picks up again: stored and not answered. */
export const RESUMABLE_STATES: readonly InboxState[] = ['pending', 'running'];

/** Persisted states nothing follows: the item may be pruned after the retention time. */
export const FINAL_STATES: readonly InboxState[] = ['done', 'failed', 'refused'];

export const isResumable = (state: InboxState): boolean => RESUMABLE_STATES.includes(state);
