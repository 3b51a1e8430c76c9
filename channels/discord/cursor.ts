import { type Client, GatewayDispatchEvents } from 'discord.js';
import { CursorFile } from '../../src/util/cursor-file.js';

/**
 * A shard that identifies anew within a run catches up from when it lost its session less this:
 * a message may be stamped by Discord's clock a little before this machine saw the close.
 */
export const SHARD_GAP_SLACK_MS = 60_000;

/**
 * A listener's cursor: the creation time (ms) of the newest message stored, in a CursorFile.
 * While it is held (a shard's catch-up still owed or running) messages stored live do not move
 * it, since one the catch-up has yet to deliver may be older: the newest is kept, and the cursor
 * moves there once the last hold is released. After a catch-up that failed it stays for the
 * rest of the run, so the next one (a restart) reads that gap again; the inbox drops what it
 * stored already. Closed with its run: a late delivery of that run moves nothing.
 */
export class ListenCursor {
  /** When the run opened it: a message created after that cannot have been answered by another lease holder. */
  readonly openedAtMs = Date.now();
  #ms: number;
  #heldMs = 0;
  #holds = 0;
  #stuck = false;
  #closed = false;

  private constructor(
    private readonly file: CursorFile,
    ms: number,
    private readonly onError: (err: unknown) => void,
  ) {
    this.#ms = ms;
  }

  /**
   * The stored cursor. None stored: `takeoverReachMs` back (a listener another instance may
   * have run until just now, ChannelContext.listenerMoves), or now when it is 0 (a first start,
   * which catches up on nothing); stored.
   */
  static async open(file: CursorFile, onError: (err: unknown) => void, takeoverReachMs = 0): Promise<{ cursor: ListenCursor; firstStart: boolean }> {
    const stored = await file.read();
    const fromMs = stored ?? (takeoverReachMs > 0 ? Date.now() - takeoverReachMs : undefined);
    const cursor = new ListenCursor(file, fromMs ?? Date.now(), onError);
    if (stored === undefined) file.save(cursor.ms, onError);
    return { cursor, firstStart: fromMs === undefined };
  }

  get ms(): number {
    return this.#ms;
  }

  /** A message created at `createdMs` was stored. */
  stored(createdMs: number): void {
    if (this.#holds || this.#stuck) this.#heldMs = Math.max(this.#heldMs, createdMs);
    else this.#move(createdMs);
  }

  /** Keeps the cursor where it is until the returned release (idempotent) is called. */
  hold(): () => void {
    this.#holds++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (--this.#holds === 0 && !this.#stuck) this.#move(this.#heldMs);
    };
  }

  /** A catch-up delivered up to `newestMs`: the cursor may go there once released. */
  caughtUp(newestMs: number): void {
    this.#heldMs = Math.max(this.#heldMs, newestMs);
  }

  /** A catch-up did not finish: the cursor stays where it is for the rest of the run. */
  failed(): void {
    this.#stuck = true;
  }

  /** No catch-up owed, running or failed: what the cursor says was all stored. */
  get settled(): boolean {
    return this.#holds === 0 && !this.#stuck;
  }

  /** The run ended: nothing moves it any more. */
  close(): void {
    this.#closed = true;
  }

  #move(ms: number): void {
    if (ms <= this.#ms || this.#closed) return;
    this.#ms = ms;
    this.file.save(ms, this.onError);
  }

  /** Resolves once every stored value is written. */
  flushed(): Promise<void> {
    return this.file.flushed();
  }
}

/**
 * A run's cursor: the configured file for every shard, a file of its own for one shard of
 * several run alone (cluster mode's `listenPart`), so shards on different leases do not move
 * each other's. None without a file (tests): nothing is caught up. `catchUpOwed`: a session
 * handed over by an upgrade whose old process had not caught up (handover.ts).
 * `takeoverReachMs`: how far back a cursor none stored starts (ListenCursor.open).
 */
export async function openListenCursor(
  path: string | undefined,
  shards: readonly number[],
  shardCount: number,
  catchUpOwed: boolean,
  onError: (err: unknown) => void,
  takeoverReachMs = 0,
): Promise<{ cursor: ListenCursor; firstStart: boolean } | undefined> {
  if (!path) return undefined;
  const own = shards.length === 1 && shardCount > 1 ? `${path.replace(/\.cursor$/, '')}.shard-${shards[0]}.cursor` : path;
  const opened = await ListenCursor.open(new CursorFile(own), onError, takeoverReachMs);
  // Handed a session whose old process had not caught up: the cursor stays before that gap (handover.ts).
  if (catchUpOwed) opened.cursor.failed();
  return opened;
}

/**
 * Calls `start(shard, sinceMs, release)` when a shard turns ready (its guilds cached) after a
 * READY of its own, that is a fresh IDENTIFY: a RESUME has none (Discord replays what was
 * missed), nor has a handed-over session (handover.ts shows discord.js a READY that came as no
 * gateway event). The cursor is held from the run's start until each of `shards` has its first
 * session caught up (or resumed: nothing was missed), since Discord spaces the shards'
 * IDENTIFYs apart and one shard's messages must not move it past what another has yet to read;
 * and from each later READY until its catch-up is done, since live messages come before the
 * guilds are loaded. `release` ends that hold. A run's first READY reads from where the cursor
 * stood when the run began (none, a first start: nothing); a later one, after the session was
 * lost, from when the shard first lost it (SHARD_GAP_SLACK_MS earlier) or the cursor, whichever
 * is older. A READY that comes again before the shard was ready keeps the catch-up it owed
 * (the older start, the same hold). Returns the removal of the listener on `client.ws` (the
 * client drops its own).
 */
export function catchUpOnReady(
  client: Client,
  shards: readonly number[],
  c: { cursor: ListenCursor; firstStart: boolean } | undefined,
  start: (shard: number, sinceMs: number, release: () => void) => void,
): () => void {
  if (!c) return () => {};
  const openedMs = c.cursor.ms;
  const firstHolds = new Map<number, () => void>(c.firstStart ? [] : shards.map((s) => [s, c.cursor.hold()]));
  const identified = new Set<number>();
  const lostAtMs = new Map<number, number>();
  const due = new Map<number, { sinceMs: number; release: () => void }>();
  const onReady = (_d: unknown, shard: number) => {
    const first = !identified.has(shard);
    identified.add(shard);
    if (first && c.firstStart) return;
    const lost = lostAtMs.get(shard);
    lostAtMs.delete(shard);
    const owed = due.get(shard);
    const firstHold = firstHolds.get(shard);
    firstHolds.delete(shard);
    const sinceMs = first ? openedMs : Math.min(c.cursor.ms, (lost ?? Date.now()) - SHARD_GAP_SLACK_MS);
    due.set(shard, { sinceMs: Math.min(sinceMs, owed?.sinceMs ?? sinceMs), release: owed?.release ?? firstHold ?? c.cursor.hold() });
  };
  client.ws.on(GatewayDispatchEvents.Ready, onReady);
  // The first close of an outage: each failed RESUME closes again.
  client.on('shardReconnecting', (shard) => void (lostAtMs.has(shard) || lostAtMs.set(shard, Date.now())));
  const resumed = (shard: number) => {
    // A catch-up still owed (a READY whose guilds are loading) goes on holding until it ran.
    if (due.has(shard)) return;
    firstHolds.get(shard)?.();
    firstHolds.delete(shard);
  };
  client.on('shardResume', (shard) => {
    lostAtMs.delete(shard);
    resumed(shard);
  });
  client.on('shardReady', (shard) => {
    const d = due.get(shard);
    // Ready without a READY of its own (a handed-over session): nothing was missed.
    if (!d) return resumed(shard);
    due.delete(shard);
    start(shard, d.sinceMs, d.release);
  });
  return () => client.ws.off(GatewayDispatchEvents.Ready, onReady);
}
