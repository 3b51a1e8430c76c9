// The item types are part of the topology contract (an item enters through its intake).
export type { InboxItem, InboxState, ItemState } from '../contracts/topology.js';
import type { InboxState, ItemState } from '../contracts/topology.js';

/** What happens to an item; each event is one move of the lifecycle. */
export type ItemEvent = 'queue' | 'refuse' | 'start' | 'reply' | 'finish' | 'drop' | 'release' | 'interrupt';

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
  interrupt: { from: ['running'], to: ['pending'] },
};

/** Persisted states a new process picks up again: stored and not answered. */
export const RESUMABLE_STATES: readonly InboxState[] = ['pending', 'running'];

/** Persisted states nothing follows: the item may be pruned after the retention time. */
export const FINAL_STATES: readonly InboxState[] = ['done', 'failed', 'refused'];

export const isResumable = (state: InboxState): boolean => RESUMABLE_STATES.includes(state);
