import type { Db } from './db.js';

/**
 * Writes that close a turn (its final state, its session turn) from many turns that end
 * in the same tick, committed together in one transaction on the next tick. Writes that
 * guard against loss or duplicates (the inbox insert before the platform ack, the reply
 * refs after the first send) never go through here.
 */
export class GroupCommit {
  #pending: Array<() => void> = [];
  #scheduled = false;

  constructor(private readonly db: Db) {}

  add(write: () => void): void {
    this.#pending.push(write);
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => this.flush());
  }

  /** Commits everything queued; called on the next tick and before the database closes. */
  flush(): void {
    this.#scheduled = false;
    const writes = this.#pending;
    if (!writes.length || !this.db.open) return;
    this.#pending = [];
    this.db.transaction(() => {
      for (const w of writes) w();
    })();
  }
}
