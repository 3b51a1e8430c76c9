import type { ChannelMessage, MessageRef } from '../contracts/message.js';
import type { Db } from './db.js';
import type { GroupCommit } from './group-commit.js';
import { isLockFault, isStorageFault } from './health.js';
import { CodedError } from '../contracts/errors.js';
import { FINAL_STATES, RESUMABLE_STATES, type InboxItem, type InboxState } from '../inbox/item.js';
import type { LocalItemStore } from '../inbox/lifecycle.js';

export type { InboxItem, InboxState };

/** How long a new message may wait for a lock another process holds before it is refused. */
const LOCK_WAIT_MS = 5_000;

/** `'a','b'` for an SQL `IN (…)`: the lifecycle's state lists, fixed when the statements are prepared. */
const sqlList = (states: readonly InboxState[]) => states.map((s) => `'${s}'`).join(',');

interface Row {
  id: number;
  scope: string;
  payload: string;
  state: InboxState;
  reply_refs: string;
}

const toItem = (r: Row): InboxItem => ({
  id: r.id,
  scope: r.scope,
  message: JSON.parse(r.payload) as ChannelMessage,
  state: r.state,
  replyRefs: JSON.parse(r.reply_refs) as MessageRef[],
});

/** A message a batch stored, as `readAlongside` is told of it. */
export interface StoredMessage {
  readonly msg: ChannelMessage;
  readonly scope: string;
}

/** A new message waiting for its batch's insert. */
interface Pending {
  msg: ChannelMessage;
  scope: string;
  state: InboxState;
  resolve(id: number | undefined): void;
  reject(err: unknown): void;
}

/**
 * The durable inbox: a message is answered only after it is committed here, and a second
 * delivery of the same (channel, message id) is recognised and dropped. It persists what
 * the item lifecycle (src/inbox/lifecycle.ts) decides and decides no state itself.
 */
export class Inbox implements LocalItemStore {
  readonly #insert;
  readonly #setState;
  readonly #setRefs;
  readonly #setRefsAndState;
  readonly #unfinished;
  readonly #prune;

  readonly #db: Db;
  readonly #group: GroupCommit | undefined;
  /**
   * Reply refs queued in the group commit and not yet written, by item. A final state (or
   * newer refs) asked for before they are written joins the same UPDATE: they would have
   * committed in the same transaction anyway, and a short reply's refs and its end are one
   * row write instead of two.
   */
  readonly #queuedRefs = new Map<number, { refs: readonly MessageRef[]; end?: { state: InboxState; error: string | null } }>();
  /** One transaction function for every batch: better-sqlite3 builds five closures per `transaction()`. */
  readonly #insertBatch: (batch: Pending[]) => Array<number | undefined>;
  /** Inserts asked for in this microtask, committed together (see `store`). */
  #batch: Pending[] = [];
  /** Reads the turns of a batch's new messages will need, run inside its transaction (see `readAlongside`). */
  #alongside: ((stored: readonly StoredMessage[]) => void) | undefined;

  constructor(db: Db, group?: GroupCommit) {
    this.#db = db;
    this.#group = group;
    this.#insertBatch = db.transaction((batch: Pending[]) => {
      const ids = batch.map((b) => this.add(b.msg, b.scope, b.state));
      if (this.#alongside) this.#readAlongside(batch, ids);
      return ids;
    });
    this.#insert = db.prepare(
      `INSERT INTO inbox (channel_id, message_id, scope, payload, state, received_at, updated_at)
       VALUES (@channelId, @messageId, @scope, @payload, @state, @now, @now)
       ON CONFLICT (channel_id, message_id) DO NOTHING RETURNING id`,
    );
    this.#setState = db.prepare(`UPDATE inbox SET state = ?, error = ?, updated_at = ? WHERE id = ?`);
    // The lifecycle writes refs only while the item runs: the first message sent is when its
    // row turns "running", one commit for both.
    this.#setRefs = db.prepare(`UPDATE inbox SET reply_refs = ?, state = 'running', updated_at = ? WHERE id = ?`);
    this.#setRefsAndState = db.prepare(`UPDATE inbox SET reply_refs = ?, state = ?, error = ?, updated_at = ? WHERE id = ?`);
    this.#unfinished = db.prepare(`SELECT id, scope, payload, state, reply_refs FROM inbox WHERE state IN (${sqlList(RESUMABLE_STATES)}) ORDER BY id`);
    this.#prune = db.prepare(`DELETE FROM inbox WHERE state IN (${sqlList(FINAL_STATES)}) AND updated_at < ?`);
  }

  /**
   * Has `read` run inside each batch's transaction, after its inserts, with the new messages
   * that will wait for a turn. A read outside a transaction opens and closes a WAL read
   * transaction of its own (5-17 us here, more than the lookup); inside the batch's it costs
   * the lookup alone, for the turns about to start (the conversation's preferences and its
   * active session, two reads per new conversation; see src/store/turn-reads.ts).
   * A read that fails does not fail the batch (the turn reads again where it needs the row),
   * unless it was a storage fault or SQLite ended the transaction: then the batch fails.
   */
  readAlongside(read: (stored: readonly StoredMessage[]) => void): void {
    this.#alongside = read;
  }

  #readAlongside(batch: readonly Pending[], ids: ReadonlyArray<number | undefined>): void {
    const stored = batch.filter((b, i) => ids[i] !== undefined && b.state === 'pending');
    if (stored.length === 0) return;
    try {
      this.#alongside!(stored);
    } catch (err) {
      // A fault after which SQLite rolled the transaction back itself (a full disk, an I/O
      // error) is the batch's own: it fails the batch, which is held and retried as any
      // refused write. Anything else leaves only the turn's read to run where it needs it.
      if (isStorageFault(err) || !this.#db.inTransaction) throw err;
    }
  }

  /** Stores `msg`; returns its id, or undefined when this (channel, message id) is already stored. */
  add(msg: ChannelMessage, scope: string, state: InboxState = 'pending'): number | undefined {
    const row = this.#insert.get({ channelId: msg.channelId, messageId: msg.messageId, scope, payload: JSON.stringify(msg), state, now: Date.now() }) as
      | { id: number }
      | undefined;
    return row?.id;
  }

  /**
   * Like `add`, but every message stored in the same microtask shares one transaction: a
   * platform batch (a `getUpdates` answer of up to 100 updates) costs one commit, not one per
   * message. Resolves once committed, in the order asked; rejects them all if the commit fails.
   */
  store(msg: ChannelMessage, scope: string, state: InboxState = 'pending'): Promise<number | undefined> {
    return new Promise((resolve, reject) => {
      if (this.#batch.push({ msg, scope, state, resolve, reject }) === 1) queueMicrotask(() => this.#commitBatch());
    });
  }

  #commitBatch(): void {
    const batch = this.#batch;
    this.#batch = [];
    let ids: Array<number | undefined>;
    try {
      ids = this.#insertBatch(batch);
    } catch (err) {
      for (const b of batch) b.reject(err);
      return;
    }
    for (const [i, b] of batch.entries()) b.resolve(ids[i]);
  }

  /**
   * Stores a new message (batched as `store` does) before the platform is acknowledged,
   * without blocking the event loop on a lock another process holds: a short busy wait,
   * then waits for the store to take writes again (at most LOCK_WAIT_MS). Rejects with STORAGE_UNAVAILABLE (retryable)
   * when it cannot be stored, so the caller does not ack and the platform delivers again.
   */
  async addDurable(msg: ChannelMessage, scope: string, state: InboxState = 'pending', signal?: AbortSignal): Promise<number | undefined> {
    const health = this.#group?.health;
    for (let attempt = 0; ; attempt++) {
      if (health && !health.ok) {
        if (!isLockFault(health.code) || attempt > 1 || !(await health.whenOk(LOCK_WAIT_MS, signal))) {
          throw new CodedError('STORAGE_UNAVAILABLE', `the message was not stored (${health.code ?? 'storage fault'})`, { retryable: true });
        }
      }
      try {
        const id = await this.store(msg, scope, state);
        if (health && !health.ok) this.#group!.succeeded();
        return id;
      } catch (err) {
        if (!isStorageFault(err) || !this.#group) throw err;
        this.#group.failed(err);
      }
    }
  }

  /**
   * One attempt to store a new message (batched as `store` does), whatever the store's
   * health says: how held messages are retried and how a new one is tried first. Rejects
   * with STORAGE_UNAVAILABLE (retryable) when the database refuses it; never waits for a lock.
   */
  async tryAdd(msg: ChannelMessage, scope: string, state: InboxState = 'pending'): Promise<number | undefined> {
    try {
      const id = await this.store(msg, scope, state);
      if (this.#group && !this.#group.health.ok) this.#group.succeeded();
      return id;
    } catch (err) {
      if (!isStorageFault(err) || !this.#group) throw err;
      this.#group.failed(err);
      throw new CodedError('STORAGE_UNAVAILABLE', `the message was not stored (${err.code})`, { retryable: true, cause: err });
    }
  }

  /** Whether the store takes writes now (false while it is degraded). */
  get writable(): boolean {
    return this.#group?.health.ok ?? true;
  }

  setState(id: number, state: InboxState, error?: string): void {
    const write = () => this.#setState.run(state, error ?? null, Date.now(), id);
    // A final state can ride the group commit: if the process dies first, the item is
    // re-run into the draft it already has, so nothing is lost or sent twice.
    const queued = this.#queuedRefs.get(id);
    if (this.#group && (state === 'done' || state === 'failed')) {
      if (queued) queued.end = { state, error: error ?? null };
      else this.#group.add(write);
    } else if (this.#group) this.#group.now(write);
    else write();
  }

  /** Records the messages answering this item (so a re-run edits them instead of sending new ones) and that it runs. */
  setReplyRefs(id: number, refs: readonly MessageRef[]): void {
    // Refs written in the same event-loop turn share one commit on the next tick: the window in
    // which a kill -9 can make a re-run send instead of edit grows from one write to one tick.
    // While the store refuses writes they wait in its retry queue and the turn goes on.
    if (!this.#group) {
      this.#setRefs.run(JSON.stringify(refs), Date.now(), id);
      return;
    }
    const queued = this.#queuedRefs.get(id);
    if (queued) {
      queued.refs = refs;
      return;
    }
    const entry: { refs: readonly MessageRef[]; end?: { state: InboxState; error: string | null } } = { refs };
    this.#queuedRefs.set(id, entry);
    this.#group.add(() => {
      // Run again after a storage fault, it writes the same entry; what is asked after this first run queues its own write.
      if (this.#queuedRefs.get(id) === entry) this.#queuedRefs.delete(id);
      const json = JSON.stringify(entry.refs);
      if (entry.end) this.#setRefsAndState.run(json, entry.end.state, entry.end.error, Date.now(), id);
      else this.#setRefs.run(json, Date.now(), id);
    });
  }

  /** Deletes finished items older than `retentionHours`; returns how many (0 when the store refuses writes). */
  tryPrune(retentionHours: number): number {
    try {
      return this.prune(retentionHours);
    } catch (err) {
      if (!isStorageFault(err)) throw err;
      this.#group?.failed(err);
      return 0;
    }
  }

  /** Items the previous process left pending or running, oldest first. */
  unfinished(): InboxItem[] {
    return (this.#unfinished.all() as Row[]).map(toItem);
  }

  /** Deletes finished items older than `retentionHours`; returns how many. */
  prune(retentionHours: number, nowMs = Date.now()): number {
    return this.#prune.run(nowMs - retentionHours * 3_600_000).changes;
  }
}
