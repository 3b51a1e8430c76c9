import type { KV } from '@nats-io/kv';
import type { Logger } from '../observe/logger.js';
import { CodedError, errorMessage } from '../contracts/errors.js';
import { sleep } from '../util/abortable.js';

/** What a lease key holds. */
export interface LeaseValue {
  owner: string;
  /** What the owner tells about itself (instance keys: generation, turns). */
  info?: Record<string, unknown>;
  /** The owner's clock when it last renewed; shown in /status, never used to decide. */
  renewedAt: number;
}

/** One row of the lease table as this instance last saw it. */
export interface LeaseRow {
  key: string;
  owner: string;
  revision: number;
  /** ms since this instance last saw the key change (its own clock). */
  ageMs: number;
  expired: boolean;
  info?: Record<string, unknown>;
}

/**
 * Leases in a JetStream KV bucket. A lease is one key: taken with `create` (fails when
 * the key exists) or, once it has not changed for a whole TTL on this instance's clock,
 * with `update` at the revision seen (fails when the owner renewed meanwhile). The owner
 * renews with `update` at its own revision every third of the TTL and gives the lease up
 * (fences itself) when it could not renew for 80 % of the TTL, so two owners never
 * overlap while clocks run at the same rate. The bucket's max age (the TTL) removes
 * leases of instances that are gone for good.
 */
export class Leases {
  readonly #seen = new Map<string, { value: LeaseValue; revision: number; seenAt: number }>();
  readonly #stop = new AbortController();
  #watching: Promise<void> | undefined;
  /** KV requests sent (takes, renewals, reads, releases), for /status and the bench. */
  kvOps = 0;

  constructor(
    readonly kv: KV,
    readonly instanceId: string,
    readonly ttlMs: number,
    private readonly log: Logger,
  ) {}

  /**
   * Starts following every key, so status and contenders need no reads of their own. The
   * watch is followed again whenever its iterator ends while this instance runs (its
   * subscription closed or failed): a table that stopped changing would make every other
   * instance look expired, and this one would then count only itself and keep every
   * partition.
   */
  async start(): Promise<void> {
    const first = await this.kv.watch({ key: '>' });
    this.#watching = this.#follow(first);
  }

  async #follow(first: KvWatch): Promise<void> {
    let watch: KvWatch | undefined = first;
    const stop = () => watch?.stop();
    this.#stop.signal.addEventListener('abort', stop, { once: true });
    let backoffMs = WATCH_RETRY_MIN_MS;
    try {
      while (!this.#stop.signal.aborted) {
        const openedAt = Date.now();
        try {
          watch ??= await this.kv.watch({ key: '>' });
          if (this.#stop.signal.aborted) break;
          for await (const e of watch) this.#apply(e.operation, e.key, e.revision, () => e.json<LeaseValue>());
          if (this.#stop.signal.aborted) break;
          this.log.warn({ retryInMs: backoffMs }, 'lease watch ended; following the bucket again');
        } catch (err) {
          if (this.#stop.signal.aborted) break;
          this.log.warn({ err, retryInMs: backoffMs }, 'lease watch failed; following the bucket again');
        }
        watch = undefined;
        await sleep(backoffMs, this.#stop.signal);
        // A watch that ran for a whole TTL starts the pauses over; one that keeps ending at
        // once (every new watch replays the bucket first) waits longer each time.
        backoffMs = Date.now() - openedAt >= this.ttlMs ? WATCH_RETRY_MIN_MS : Math.min(backoffMs * 2, Math.max(WATCH_RETRY_MIN_MS, this.ttlMs / 3));
      }
    } finally {
      this.#stop.signal.removeEventListener('abort', stop);
      // A watch opened while close() was aborting is stopped here (stop() is idempotent).
      watch?.stop();
    }
  }

  /**
   * One change seen by the watch. A key seen again at the revision already held keeps the
   * time it was first seen (a restarted watch replays every key's current value): its age
   * must still run from its last real change, or a dead holder would look renewed. A value
   * that is not a lease (not JSON: written by something else) is skipped with a warning,
   * not allowed to end the watch.
   */
  #apply(operation: string, key: string, revision: number, value: () => LeaseValue): void {
    if (operation !== 'PUT') {
      this.#seen.delete(key);
      return;
    }
    const had = this.#seen.get(key);
    if (had && had.revision === revision) return;
    let parsed: LeaseValue;
    try {
      parsed = value();
    } catch (err) {
      this.#seen.delete(key);
      this.log.warn({ err, lease: key, revision }, 'lease key holds no lease value; ignored');
      return;
    }
    this.#seen.set(key, { value: parsed, revision, seenAt: Date.now() });
  }

  async close(): Promise<void> {
    this.#stop.abort();
    await this.#watching;
  }

  #count(): KV {
    this.kvOps++;
    return this.kv;
  }

  /** The bucket, counting one request (for a held lease's renewals and release). */
  counted(): KV {
    return this.#count();
  }

  /** Every lease with its owner and age, for /status. */
  table(prefix = ''): LeaseRow[] {
    const now = Date.now();
    return [...this.#seen.entries()]
      .filter(([k]) => k.startsWith(prefix))
      .map(([key, s]) => ({
        key,
        owner: s.value.owner,
        revision: s.revision,
        ageMs: now - s.seenAt,
        expired: now - s.seenAt > this.ttlMs,
        ...(s.value.info ? { info: s.value.info } : {}),
      }))
      .sort((a, b) => a.key.localeCompare(b.key));
  }

  /** The live owner of `key`, if any. */
  ownerOf(key: string): string | undefined {
    const s = this.#seen.get(key);
    return s && Date.now() - s.seenAt <= this.ttlMs ? s.value.owner : undefined;
  }

  value(info?: () => Record<string, unknown>): string {
    return JSON.stringify({ owner: this.instanceId, renewedAt: Date.now(), ...(info ? { info: info() } : {}) } satisfies LeaseValue);
  }

  /**
   * One attempt to take `key`; the held lease, or undefined when someone else holds it. A
   * key that turns out free while it is being taken (its holder released it, or the
   * bucket's max age removed it, between the refused write and the read) is tried again, a
   * few times: undefined means a holder was seen, never that the key was merely in motion.
   */
  async tryAcquire(key: string, info?: () => Record<string, unknown>): Promise<HeldLease | undefined> {
    const sent = Date.now();
    try {
      for (let attempt = 0; attempt < FREE_KEY_ATTEMPTS; attempt++) {
        const held = await this.#attempt(key, sent, info);
        if (held !== MOVED) return held;
      }
      return undefined;
    } catch (err) {
      if (isWrongRevision(err)) return undefined;
      throw new CodedError('CLUSTER_UNAVAILABLE', `lease ${key}: ${errorMessage(err)}`, { cause: err });
    }
  }

  async #attempt(key: string, sent: number, info?: () => Record<string, unknown>): Promise<HeldLease | undefined | typeof MOVED> {
    let seen = this.#seen.get(key);
    if (!seen) {
      try {
        return new HeldLease(this, key, await this.#count().create(key, this.value(info)), sent, info);
      } catch (err) {
        if (!isWrongRevision(err)) throw err;
      }
      // The key exists but the watch has not shown it yet (this process just started):
      // read it, so a lease left by this instance id's previous run (a kill -9, then a
      // restart within the TTL) is taken back at once instead of refused.
      const now = await this.#count().get(key);
      if (now?.operation !== 'PUT') return MOVED;
      seen = { value: now.json<LeaseValue>(), revision: now.revision, seenAt: Date.now() };
      if (!this.#seen.has(key)) this.#seen.set(key, seen);
      if (seen.value.owner !== this.instanceId) return undefined;
    }
    if (seen.value.owner !== this.instanceId && Date.now() - seen.seenAt <= this.ttlMs) return undefined;
    // Not renewed for a whole TTL (or our own, left by a previous run of this instance id).
    try {
      return new HeldLease(this, key, await this.#count().update(key, this.value(info), seen.revision), sent, info);
    } catch (err) {
      if (!isWrongRevision(err)) throw err;
    }
    // Expired by the bucket's max age (the watch is not told) or renewed after all.
    const now = await this.#count().get(key);
    if (now && now.operation === 'PUT') {
      if (now.revision !== seen.revision) this.#seen.set(key, { value: now.json<LeaseValue>(), revision: now.revision, seenAt: Date.now() });
      return undefined;
    }
    this.#seen.delete(key);
    return MOVED;
  }

  /** Waits until `key` is ours (or `signal` aborts: then undefined). `onWaiting` is told who holds it. */
  async acquire(
    key: string,
    signal: AbortSignal,
    onWaiting?: (owner: string | undefined) => void,
    info?: () => Record<string, unknown>,
  ): Promise<HeldLease | undefined> {
    const pollMs = Math.max(100, Math.floor(this.ttlMs / 5));
    while (!signal.aborted) {
      try {
        const held = await this.tryAcquire(key, info);
        if (held) return held;
        onWaiting?.(this.ownerOf(key));
      } catch (err) {
        this.log.warn({ err, lease: key }, 'lease attempt failed; trying again');
      }
      // Try again when the holder's TTL runs out (as this instance last saw it renewed), or
      // after a jittered step when nobody holds it visibly.
      const seen = this.#seen.get(key);
      const expiresInMs = seen ? seen.seenAt + this.ttlMs + 20 - Date.now() : 0;
      await sleep(expiresInMs > 0 ? Math.min(expiresInMs, pollMs * 2) : pollMs + Math.floor(Math.random() * pollMs), signal);
    }
    return undefined;
  }
}

/** What `KV.watch` yields: the bucket's changes, from each key's current value on. */
type KvWatch = Awaited<ReturnType<KV['watch']>>;
/** The first pause before a lease watch that ended is followed again; doubled up to a third of the TTL. */
const WATCH_RETRY_MIN_MS = 100;
/** How often a key found free while being taken is tried again before it counts as held. */
const FREE_KEY_ATTEMPTS = 3;
/** The key changed state under the attempt (freed or expired): try again. */
const MOVED = Symbol('moved');

function isWrongRevision(err: unknown): boolean {
  return /wrong last sequence|key exists/i.test(errorMessage(err));
}

/** A lease this instance holds; `signal` aborts when it is lost or released. */
export class HeldLease {
  readonly #lost = new AbortController();
  readonly #timer: NodeJS.Timeout;
  #revision: number;
  #lastOkAt: number;
  #renewing = false;

  constructor(
    private readonly leases: Leases,
    readonly key: string,
    revision: number,
    sentAt: number,
    private readonly info?: () => Record<string, unknown>,
  ) {
    this.#revision = revision;
    this.#lastOkAt = sentAt;
    this.#timer = setInterval(() => void this.#renew(), Math.max(100, Math.floor(leases.ttlMs / 3)));
    this.#timer.unref();
    this.#armFence();
  }

  /**
   * Fires when no renewal succeeded for 80 % of the TTL. A timer rather than a check in the
   * renewal, so a process that was stalled (CPU starved, paused) fences itself in the first
   * timer phase after it wakes, before the I/O that would have it write as the owner.
   */
  #armFence(): void {
    clearTimeout(this.#fence);
    this.#fence = setTimeout(
      () => this.#lose(`not renewed for ${Date.now() - this.#lastOkAt} ms`),
      Math.max(0, this.#lastOkAt + this.leases.ttlMs * 0.8 - Date.now()),
    );
    this.#fence.unref();
  }
  #fence: NodeJS.Timeout | undefined;

  get signal(): AbortSignal {
    return this.#lost.signal;
  }
  #released = false;
  /** Given up by this instance (not lost to a stall or another instance). */
  get released(): boolean {
    return this.#released;
  }

  #lose(reason: string): void {
    clearInterval(this.#timer);
    clearTimeout(this.#fence);
    if (this.#lost.signal.aborted) return;
    this.#lost.abort(new CodedError('CLUSTER_LEASE_LOST', `${this.key}: ${reason}`));
  }

  async #renew(): Promise<void> {
    if (this.#renewing || this.#lost.signal.aborted) return;
    this.#renewing = true;
    // Measured from when the request left: the server may have stored it any time after.
    const sent = Date.now();
    try {
      this.#revision = await this.leases.counted().update(this.key, this.leases.value(this.info), this.#revision, Math.floor(this.leases.ttlMs / 3));
      this.#lastOkAt = sent;
      if (!this.#lost.signal.aborted) this.#armFence();
    } catch (err) {
      if (isWrongRevision(err)) this.#lose('taken by another instance');
      else if (Date.now() - this.#lastOkAt > this.leases.ttlMs * 0.8) this.#lose(`not renewed for ${Date.now() - this.#lastOkAt} ms: ${errorMessage(err)}`);
    } finally {
      this.#renewing = false;
    }
  }

  /** Gives the lease up at once so a contender need not wait for the TTL. */
  async release(): Promise<void> {
    if (this.#lost.signal.aborted) return;
    // Set before the abort, so whoever listens to `signal` can tell a release from a loss.
    this.#released = true;
    this.#lose('released');
    try {
      await this.leases.counted().delete(this.key, { previousSeq: this.#revision });
    } catch {
      // Someone took it already, or NATS is away: the TTL ends it either way.
    }
  }
}
