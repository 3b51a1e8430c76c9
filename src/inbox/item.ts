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

/**
 * Every move an item may make, from each state. `queued → pending` is a hand-over to
 * another cluster instance (the item stays pending in the shared inbox); final states lead
 * nowhere.
 */
export const TRANSITIONS: Readonly<Record<ItemState, readonly ItemState[]>> = {
  pending: ['queued', 'refused'],
  queued: ['running', 'failed', 'pending'],
  running: ['done', 'failed'],
  done: [],
  failed: [],
  refused: [],
};

/** Persisted states a new process picks up again: stored and not answered. */
export const RESUMABLE_STATES: readonly InboxState[] = ['pending', 'running'];

/** Persisted states nothing follows: the item may be pruned after the retention time. */
export const FINAL_STATES: readonly InboxState[] = ['done', 'failed', 'refused'];

export const isResumable = (state: InboxState): boolean => RESUMABLE_STATES.includes(state);
