import { readFile } from 'node:fs/promises';
import type { Logger } from 'pino';
import type { SharedRecord } from '../../src/contracts/shared-record.js';
import { CodedError } from '../../src/contracts/errors.js';
import { raceAbort, settleWithin } from '../../src/util/abortable.js';
import { CoalescedFile } from '../../src/util/cursor-file.js';
import { MAX_KNOWN_DM_CHANNELS } from './catch-up.js';

/** The file holds at most MAX_KNOWN_DM_CHANNELS snowflakes as JSON: one larger is not read (nor is a shared list). */
const MAX_FILE_BYTES = 4096;
const SNOWFLAKE = /^\d{1,20}$/;

/** The name of the shared list in cluster mode (ChannelContext.sharedRecord). */
export const SHARED_DM_CHANNELS = 'dm-channels';

/**
 * How long one read of the shared list (as a run of the listener starts) or one write of it
 * may take: past it the run goes on with the list it has, since PostgreSQL being slow or away
 * must not keep the gateway from connecting nor hold a message.
 */
export const SHARED_DM_CHANNELS_TIMEOUT_MS = 5_000;

/** The snowflakes of a stored list, in its order; none when it is not one (malformed, or larger than the bound). */
function parseIds(text: string): string[] {
  if (text.length > MAX_FILE_BYTES) return [];
  let stored: unknown;
  try {
    stored = JSON.parse(text);
  } catch {
    return [];
  }
  return Array.isArray(stored) ? stored.filter((id): id is string => typeof id === 'string' && SNOWFLAKE.test(id)) : [];
}

/** `first`'s ids, then `then`'s not among them, at most the bound. */
function merged(first: readonly string[], then: readonly string[]): string[] {
  return [...new Set([...first, ...then])].slice(0, MAX_KNOWN_DM_CHANNELS);
}

/**
 * `fn` with a signal that aborts with `signal` or after `ms`, whichever is first, and its
 * outcome raced with that signal (a record that ignored it is not waited for).
 */
async function within<T>(ms: number, signal: AbortSignal | undefined, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const bound = new AbortController();
  const timer = setTimeout(
    () => bound.abort(new CodedError('CLUSTER_UNAVAILABLE', `the shared list of Discord DM channels got no answer within ${ms} ms`)),
    ms,
  );
  const onAbort = () => bound.abort(signal?.reason);
  if (signal?.aborted) onAbort();
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    return await raceAbort(fn(bound.signal), bound.signal);
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
  }
}

/**
 * The DM channels messages came from, the newest first, at most MAX_KNOWN_DM_CHANNELS: a
 * catch-up reads them, since Discord lists no bot's DM channels. Kept in a file beside the
 * cursor (a CoalescedFile), so a restart catches up on DMs sent while the daemon was down too.
 *
 * In cluster mode the listener runs wherever its lease is, and the instance that takes it
 * over (after a kill -9 of the holder) must read the DM channels the holder saw: the list is
 * also kept in a record every instance reads (`shared`, ChannelContext.sharedRecord), read
 * as each run starts and written on each change. Its writes are coalesced like the file's
 * (one in flight, the newest list next) and bounded in time; one that fails is logged, the
 * file is written all the same, and the next DM writes the list again. The last write wins:
 * at a time one instance runs the shard DMs go to, and it writes the whole list it merged.
 */
export class KnownDmChannels {
  #ids: string[] = [];
  #fileRead = false;
  readonly #file: CoalescedFile | undefined;
  /** The newest list not yet handed to the shared record, and the write loop while one runs. */
  #sharedNext: string | undefined;
  #sharing: Promise<void> | undefined;
  /** The last shared write failed: this instance's list is newer than the shared one. */
  #stale = false;
  /**
   * The shared list could not be read (as a run started): it is read before the next write,
   * which would otherwise drop the DM channels only other instances saw for every later holder.
   */
  #unread = false;

  /** `path`: none keeps the list in memory only; `shared`: none on one node. `warn` hears a failure, named by `what`. */
  constructor(
    private readonly path: string | undefined,
    private readonly warn: (err: unknown, what: string) => void,
    private readonly shared?: SharedRecord,
  ) {
    this.#file = path === undefined ? undefined : new CoalescedFile(path);
  }

  /**
   * Reads the stored lists: the file once (a missing, unreadable or malformed file is an empty
   * list; ids seen before stay first), and the shared list at every call (each run of the
   * listener, as another instance may have run it since), which goes first, since whoever
   * ran the listener last wrote it; unless this instance's own last write of it failed. A
   * shared list that cannot be read within SHARED_DM_CHANNELS_TIMEOUT_MS (or before `signal`)
   * leaves the local one, with a warning; one that adds to it is written to the file too. Never rejects.
   */
  async load(signal: AbortSignal): Promise<void> {
    if (!this.#fileRead && this.path) {
      this.#fileRead = true;
      const text = await readFile(this.path, 'utf8').catch(() => undefined);
      if (text !== undefined) this.#ids = merged(this.#ids, parseIds(text));
    }
    const shared = this.shared;
    if (!shared || signal.aborted) return;
    try {
      // Whoever ran the listener last wrote it: it goes first, unless this instance's list is newer.
      if (this.#merge(await this.#read(shared, signal), !this.#stale) && this.#stale) this.#share();
    } catch (err) {
      this.#unread = true;
      if (!signal.aborted) this.warn(err, "the Discord DM channels other instances saw could not be read; the catch-up reads this instance's own");
    }
  }

  /** The shared list's ids, within SHARED_DM_CHANNELS_TIMEOUT_MS (and `signal`); rejects when it cannot be read. */
  async #read(shared: SharedRecord, signal: AbortSignal | undefined): Promise<string[]> {
    const text = await within(SHARED_DM_CHANNELS_TIMEOUT_MS, signal, (s) => shared.read(s));
    this.#unread = false;
    return text === undefined ? [] : parseIds(text);
  }

  /** Merges the shared list's ids into this one's (theirs first, or ours); true when that changed it, kept in the file too. */
  #merge(others: readonly string[], theirsFirst: boolean): boolean {
    const before = JSON.stringify(this.#ids);
    this.#ids = theirsFirst ? merged(others, this.#ids) : merged(this.#ids, others);
    if (JSON.stringify(this.#ids) === before) return false;
    // Kept in the file too: a restart while PostgreSQL is away still knows them.
    this.#save();
    return true;
  }

  get ids(): readonly string[] {
    return this.#ids;
  }

  /** A message came from DM channel `id`: it goes first (stored soon when the list changed, or shared again after a failed write). */
  seen(id: string): void {
    if (!SNOWFLAKE.test(id)) return;
    if (this.#ids[0] === id) {
      if (this.#stale) this.#share();
      return;
    }
    this.#ids = merged([id], this.#ids);
    this.#save();
    this.#share();
  }

  /**
   * Resolves once every change is written (or failed) to the file, and to the shared record
   * within SHARED_DM_CHANNELS_TIMEOUT_MS: a listener stopping (an upgrade's hand-over, a
   * lease let go) waits no longer for PostgreSQL; a write still going finishes on its own.
   */
  async flushed(): Promise<void> {
    await this.#file?.flushed();
    const until = Date.now() + SHARED_DM_CHANNELS_TIMEOUT_MS;
    while (this.#sharing && Date.now() < until) await settleWithin(this.#sharing, until - Date.now());
  }

  #save(): void {
    this.#file?.save(`${JSON.stringify(this.#ids)}\n`, (err) => this.warn(err, 'could not store the Discord DM channels'));
  }

  #share(): void {
    if (!this.shared) return;
    this.#sharedNext = JSON.stringify(this.#ids);
    this.#sharing ??= this.#drainShared(this.shared);
  }

  async #drainShared(shared: SharedRecord): Promise<void> {
    try {
      while (this.#sharedNext !== undefined) {
        this.#sharedNext = undefined;
        try {
          // Not written over unread: ours first, then what the others saw.
          if (this.#unread) this.#merge(await this.#read(shared, undefined), false);
          const text = JSON.stringify(this.#ids);
          await within(SHARED_DM_CHANNELS_TIMEOUT_MS, undefined, (s) => shared.write(text, s));
          this.#stale = false;
        } catch (err) {
          // Once per run of failures: an outage would otherwise warn at every DM.
          if (!this.#stale)
            this.warn(
              err,
              'the Discord DM channels could not be shared with the other instances; this instance keeps its own file, and the next DM tries again',
            );
          this.#stale = true;
        }
      }
    } finally {
      this.#sharing = undefined;
    }
  }
}

/** The adapter's list: beside its cursor file (none: in memory only), shared in cluster mode (`sharedDmChannels`). */
export function knownDmChannels(o: { id: string; log: Logger; cursorFile?: string | undefined; sharedDmChannels?: SharedRecord | undefined }): KnownDmChannels {
  const path = o.cursorFile === undefined ? undefined : `${o.cursorFile.replace(/\.cursor$/, '')}.dm-channels.json`;
  return new KnownDmChannels(path, (err, what) => o.log.warn({ err, channel: o.id }, what), o.sharedDmChannels);
}
