import { CodedError } from '../contracts/errors.js';
import type { ChannelMessage, MessageRef } from '../contracts/message.js';
import type { ItemStore } from '../contracts/topology.js';
import { TRANSITIONS, type InboxItem, type InboxState, type ItemEvent, type ItemState } from './item.js';
import type { TurnEndingKind } from '../contracts/agent-events.js';

export type { ItemStore };

/** The SQLite inbox also stores new items and hands back the ones a previous process left. */
export interface LocalItemStore extends ItemStore {
  /** Stores before the platform is acknowledged; undefined for a redelivery already stored. */
  addDurable(msg: ChannelMessage, scope: string, state: InboxState, signal?: AbortSignal): Promise<number | undefined>;
  /** One attempt, never waiting for a lock; rejects STORAGE_UNAVAILABLE when refused; undefined for a redelivery already stored. */
  tryAdd(msg: ChannelMessage, scope: string, state: InboxState): Promise<number | undefined>;
  /** Stores in the current microtask's batch; undefined for a redelivery already stored. */
  store(msg: ChannelMessage, scope: string, state: InboxState): Promise<number | undefined>;
  /** Items stored in a resumable state, oldest first. */
  unfinished(): InboxItem[];
  /** False while the store refuses writes. */
  readonly writable: boolean;
}

/**
 * Told about every move, after it is persisted (metrics, the task tracker, ack reactions).
 * Observers must not throw: a move is not undone.
 */
export interface LifecycleObserver {
  /** An item waits in a lane. */
  queued?(item: InboxItem): void;
  /** The queue was full: the item will not be answered. */
  refused?(item: InboxItem, reason: string): void;
  /** A turn started on `items`; the first one names the turn. */
  started?(items: readonly InboxItem[]): void;
  /** A turn ended on `items`, answered (`done`) or not (`failed`). */
  finished?(items: readonly InboxItem[], state: 'done' | 'failed'): void;
  /** Queued items were dropped unanswered (/stop, a newer message, a removed channel). */
  dropped?(items: readonly InboxItem[], reason: string): void;
  /** Queued items were handed to another instance; they stay pending in the shared inbox. */
  released?(items: readonly InboxItem[]): void;
  /** A turn on `items` stopped unfinished (this process stops, or lost them): they stay resumable for the next start or owner. */
  interrupted?(items: readonly InboxItem[]): void;
}

/**
 * The one place an inbox item changes state: it checks every move against TRANSITIONS
 * (an illegal one throws INBOX_ILLEGAL_TRANSITION and changes nothing), persists it, then
 * tells the observers. Dispatch, the lanes and the turn executor call it; in cluster mode
 * items handed in by a partition consumer go through it the same way.
 */
export class ItemLifecycle {
  readonly #store: ItemStore;
  readonly #observers: readonly LifecycleObserver[];

  constructor(store: ItemStore, observers: readonly LifecycleObserver[] = []) {
    this.#store = store;
    this.#observers = [...observers];
  }

  queued(item: InboxItem): void {
    this.#move([item], 'queue', 'queued');
    for (const o of this.#observers) o.queued?.(item);
  }

  refused(item: InboxItem, reason: string): void {
    this.#move([item], 'refuse', 'refused');
    this.#store.setState(item.id, 'refused', reason);
    for (const o of this.#observers) o.refused?.(item, reason);
  }

  /** A turn starts on `items`. Nothing is written: the first reply ref marks it running. */
  started(items: readonly InboxItem[]): void {
    this.#move(items, 'start', 'running');
    for (const o of this.#observers) o.started?.(items);
  }

  /** The running turn of `items` sent (or re-sent) its reply messages. */
  replied(items: readonly InboxItem[], refs: readonly MessageRef[]): void {
    this.#move(items, 'reply', 'running');
    for (const it of items) this.#store.setReplyRefs(it.id, refs);
  }

  finished(items: readonly InboxItem[], ending: TurnEndingKind, error?: string): void {
    const state = ending === 'done' ? 'done' : 'failed';
    this.#move(items, 'finish', state);
    for (const it of items) this.#store.setState(it.id, state, ending === 'done' ? undefined : (error ?? ending));
    for (const o of this.#observers) o.finished?.(items, state);
  }

  dropped(items: readonly InboxItem[], reason: string): void {
    if (!items.length) return;
    this.#move(items, 'drop', 'failed');
    for (const it of items) this.#store.setState(it.id, 'failed', reason);
    for (const o of this.#observers) o.dropped?.(items, reason);
  }

  /** Queued items go to another owner (cluster rebalancing): nothing is written. */
  released(items: readonly InboxItem[]): void {
    if (!items.length) return;
    this.#move(items, 'release', 'pending');
    for (const o of this.#observers) o.released?.(items);
  }

  /**
   * A turn on `items` stopped before its final text went out because this process stops or
   * lost them: nothing is written, so they stay stored as pending or running (with the reply
   * messages they have) and the next start, or their next owner, runs them again.
   */
  interrupted(items: readonly InboxItem[]): void {
    this.#move(items, 'interrupt', 'pending');
    for (const it of items) this.#store.interrupted?.(it.id);
    for (const o of this.#observers) o.interrupted?.(items);
  }

  /** Checks every item before moving any, so a refused batch changes nothing. */
  #move(items: readonly InboxItem[], event: ItemEvent, to: ItemState): void {
    const { from, to: leads } = TRANSITIONS[event];
    for (const it of items) {
      if (!from.includes(it.state) || !leads.includes(to))
        throw new CodedError('INBOX_ILLEGAL_TRANSITION', `inbox item ${it.id} cannot ${event} (${it.state} → ${to})`);
    }
    for (const it of items) it.state = to;
  }
}

/**
 * Where items enter the lifecycle from the SQLite inbox: new messages (pending), control
 * commands (stored as done), and the ones a previous process left. In cluster mode items
 * enter from the partition consumer instead, as pending.
 */
export class LocalIntake {
  readonly #store: LocalItemStore;

  constructor(store: LocalItemStore) {
    this.#store = store;
  }

  /**
   * Stores a new message as pending, before the platform is acknowledged. Undefined for a
   * redelivery; rejects (STORAGE_UNAVAILABLE) when it cannot be stored.
   */
  async receive(msg: ChannelMessage, scope: string, signal?: AbortSignal): Promise<InboxItem | undefined> {
    const id = await this.#store.addDurable(msg, scope, 'pending', signal);
    return id === undefined ? undefined : { id, scope, message: msg, state: 'pending', replyRefs: [] };
  }

  /** False while the store refuses writes. */
  get writable(): boolean {
    return this.#store.writable;
  }

  /**
   * `receive` in one attempt that never waits for a lock (rejects STORAGE_UNAVAILABLE at
   * once): messages that arrive together share one commit, and the dispatcher holds what
   * the store refuses, in order (src/dispatch/hold.ts).
   */
  async tryReceive(msg: ChannelMessage, scope: string): Promise<InboxItem | undefined> {
    const id = await this.#store.tryAdd(msg, scope, 'pending');
    return id === undefined ? undefined : { id, scope, message: msg, state: 'pending', replyRefs: [] };
  }

  /**
   * Stores a control command (/stop, /approve…) as done when it arrives, so a redelivery
   * is recognised and not acted on twice; false for such a redelivery. `required`: a store
   * failure rejects (the platform delivers again); otherwise it acts at once without the
   * record, and without waiting while the store refuses writes.
   */
  async recordCommand(msg: ChannelMessage, scope: string, required: boolean): Promise<boolean> {
    const store = this.#store;
    if (required) return (await store.store(msg, scope, 'done')) !== undefined;
    if (!store.writable) return true;
    return store.addDurable(msg, scope, 'done').then(
      (id) => id !== undefined,
      () => true,
    );
  }

  /**
   * Items a previous process left stored and unanswered, as pending: a `running` one waits
   * in its lane again and its turn edits the draft its reply refs point to.
   */
  recover(): InboxItem[] {
    const items = this.#store.unfinished();
    for (const it of items) it.state = 'pending';
    return items;
  }
}
