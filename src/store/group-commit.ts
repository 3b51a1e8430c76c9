import type { Db } from './db.js';
import { isStorageFault, StorageHealth, type StorageStatus } from './health.js';

export interface GroupCommitOptions {
  health?: StorageHealth;
  /** First pause before a failed write is tried again; it doubles up to `maxRetryMs`. */
  retryMs?: number;
  maxRetryMs?: number;
  /** Told about a write dropped because it is wrong SQL (a bug), not a storage fault. */
  onDropped?: (err: unknown) => void;
}

/**
 * Writes that close a turn (its final state, its session turn) from many turns that end
 * in the same tick, committed together in one transaction on the next tick. Writes that
 * guard against loss or duplicates (the inbox insert before the platform ack, the reply
 * refs after the first send) never wait here while the database works.
 *
 * No storage fault escapes from here: a batch the database refuses (full disk, a lock
 * held by another process, I/O or corruption errors) stays queued, `health` turns
 * degraded, and the batch is tried again with backoff until it commits.
 */
export class GroupCommit {
  #pending: Array<() => void> = [];
  /** What to tell once a queued write committed (few writes ask), by the write. */
  readonly #onCommit = new Map<() => void, () => void>();
  /** Callers of `whenWritable` told by the next flush whether the store took a write after they asked. */
  #waiters: Array<(ok: boolean) => void> = [];
  #scheduled = false;
  #retry: NodeJS.Timeout | undefined;
  #retryMs: number;
  readonly #o: Required<Omit<GroupCommitOptions, 'onDropped'>> & Pick<GroupCommitOptions, 'onDropped'>;
  readonly health: StorageHealth;
  /** One transaction function for every batch: building one per flush cost more than the writes. */
  readonly #commit: (writes: Array<() => void>) => void;

  constructor(
    private readonly db: Db,
    options: GroupCommitOptions = {},
  ) {
    this.health = options.health ?? new StorageHealth();
    this.#o = {
      health: this.health,
      retryMs: options.retryMs ?? 100,
      maxRetryMs: options.maxRetryMs ?? 1000,
      ...(options.onDropped ? { onDropped: options.onDropped } : {}),
    };
    this.#retryMs = this.#o.retryMs;
    this.#commit = db.transaction((writes: Array<() => void>) => {
      for (const w of writes) w();
    });
  }

  /** Queues `write` for the next commit; `committed` is called once it is in a committed transaction. */
  add(write: () => void, committed?: () => void): void {
    this.#pending.push(write);
    if (committed) this.#onCommit.set(write, committed);
    if (this.#scheduled || this.#retry) return;
    this.#scheduled = true;
    setImmediate(() => this.flush());
  }

  /**
   * Runs `write` now. While the store is degraded it joins the retry queue instead (after
   * what already waits there, so writes keep their order). Never throws a storage fault.
   */
  now(write: () => void): void {
    if (this.#retry) {
      this.#pending.push(write);
      return;
    }
    try {
      write();
    } catch (err) {
      if (!isStorageFault(err)) throw err;
      this.#pending.push(write);
      this.failed(err);
    }
  }

  /** A write outside this queue just worked: while degraded, try the queue now rather than at the next backoff step. */
  succeeded(): void {
    if (!this.#retry) return;
    clearTimeout(this.#retry);
    this.#retry = undefined;
    this.#attempt();
  }

  /** A write outside this queue failed on a storage fault: go degraded and probe until writes work. */
  failed(err: Error & { code: string }): void {
    this.health.fail(err);
    this.#scheduleRetry();
  }

  /** Commits everything queued; called on the next tick, by the retries, and before the database closes. */
  flush(): void {
    this.#scheduled = false;
    if (!this.db.open) {
      this.#tell(false);
      return;
    }
    const writes = this.#pending;
    // Nothing to commit: a waiting `whenWritable` still needs a write to prove the store takes one.
    if (!writes.length) {
      this.#tell(this.#waiters.length > 0 && this.#probe());
      return;
    }
    this.#pending = [];
    try {
      this.#commit(writes);
      if (this.#onCommit.size) for (const w of writes) this.#committed(w);
    } catch (err) {
      if (isStorageFault(err)) {
        this.#pending = [...writes, ...this.#pending];
        this.failed(err);
        this.#tell(false);
        return;
      }
      // Wrong SQL in one write must not sink the others: commit them one by one.
      for (const w of writes) this.#one(w);
      if (this.#pending.length) this.#scheduleRetry();
    }
    this.#ok();
    this.#tell(this.health.ok);
  }

  /** Answers the `whenWritable` callers waiting for this flush. */
  #tell(ok: boolean): void {
    if (!this.#waiters.length) return;
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w(ok);
  }

  /**
   * Resolves once a write committed after this call: the group's next flush, shared by every
   * caller in the same tick and by the turn-closing writes queued for it (a no-op write only
   * when nothing else is queued). One commit per tick instead of one no-op commit per caller.
   */
  #nextCommit(): Promise<boolean> {
    return new Promise((resolve) => {
      this.#waiters.push(resolve);
      if (this.#scheduled) return;
      this.#scheduled = true;
      setImmediate(() => this.flush());
    });
  }

  #one(write: () => void): void {
    try {
      write();
      this.#committed(write);
    } catch (err) {
      if (isStorageFault(err)) this.#pending.push(write);
      else {
        this.#onCommit.delete(write);
        this.#o.onDropped?.(err);
      }
    }
  }

  #committed(write: () => void): void {
    const told = this.#onCommit.get(write);
    if (!told) return;
    this.#onCommit.delete(write);
    told();
  }

  #ok(): void {
    if (this.#pending.length) return;
    this.#retryMs = this.#o.retryMs;
    this.health.recover();
  }

  #scheduleRetry(): void {
    if (this.#retry || !this.db.open) return;
    this.#retry = setTimeout(() => {
      this.#retry = undefined;
      this.#retryMs = Math.min(this.#o.maxRetryMs, this.#retryMs * 2);
      this.#attempt();
    }, this.#retryMs);
  }

  #attempt(): void {
    if (!this.db.open) return;
    if (this.#pending.length) {
      this.flush();
      return;
    }
    // Nothing queued: a committed no-op write tells whether the database takes writes again.
    if (this.#probe()) this.#ok();
  }

  /**
   * Resolves true once the database takes writes now: at once when the next commit (the
   * group's own, or a no-op write) succeeds, otherwise when it recovers; false when `signal`
   * aborts first. `onWait` is called once if it has to wait.
   */
  async whenWritable(signal: AbortSignal, onWait?: () => void): Promise<boolean> {
    let told = false;
    for (;;) {
      if (signal.aborted || !this.db.open) return false;
      // While degraded the retry loop owns the queue (no flush is scheduled): probe directly.
      if (this.health.ok && (this.#retry ? this.#probe() : await this.#nextCommit())) return !signal.aborted;
      if (!told) onWait?.();
      told = true;
      // The retry loop probes with backoff and wakes this on recovery; the bound re-checks.
      await this.health.whenOk(1000, signal);
    }
  }

  /** A committed no-op write: true when the database takes writes (needs the write lock and a WAL page, as any write). */
  #probe(): boolean {
    try {
      const v = this.db.pragma('user_version', { simple: true }) as number;
      this.db.pragma(`user_version = ${v}`);
      return true;
    } catch (err) {
      if (!isStorageFault(err)) throw err;
      this.failed(err);
      return false;
    }
  }

  status(): StorageStatus {
    return this.health.status(this.#pending.length);
  }

  /**
   * Stops retrying and tries the queue one last time (the database is about to close);
   * returns how many writes could still not be committed.
   */
  close(): number {
    clearTimeout(this.#retry);
    this.#retry = undefined;
    this.flush();
    this.#tell(false);
    clearTimeout(this.#retry);
    this.#retry = undefined;
    return this.#pending.length;
  }
}
