import { CodedError } from '../contracts/errors.js';
import type { ChannelMessage } from '../contracts/message.js';
import { NOT_KEPT_REPLY } from '../contracts/topology.js';
import type { Logger } from '../observe/logger.js';
import { sleep } from '../util/abortable.js';

/** The one notice a conversation gets while its messages wait for storage. */
export const HELD_REPLY = "I got your message; I'll answer when storage is back.";
/** Past the hold's bound: this message is gone, and the user must send it again. */
export { NOT_KEPT_REPLY };

/**
 * How long a message waits held before its conversation is told: a lock that clears within
 * this (a backup, an operator's query) passes without a notice.
 */
export const HOLD_NOTICE_AFTER_MS = 2_000;
/** The first pause before a held batch is written again; it doubles up to HOLD_RETRY_MAX_MS. */
const HOLD_RETRY_FIRST_MS = 100;
const HOLD_RETRY_MAX_MS = 2_000;
/** Held messages written in one attempt (the SQLite inbox commits them in one transaction). */
const HOLD_BATCH = 100;

/** A message waiting for the durable write, with the deliver calls (a platform's redeliveries) waiting on it. */
export interface Held {
  readonly msg: ChannelMessage;
  readonly scope: string;
  /** The group's unaddressed messages taken as context for it when it arrived. */
  readonly passive: ChannelMessage[];
  readonly bytes: number;
  readonly sinceMs: number;
  readonly waiters: Array<{ resolve(stored: boolean): void; reject(err: unknown): void }>;
}

export interface IntakeHoldOptions<R> {
  /** The per-channel bound: `[limits] degraded_hold_messages` and `degraded_hold_bytes`. */
  limits(): { messages: number; bytes: number };
  /**
   * Writes a batch durably, in order; settles one result per entry. An entry refused for a
   * reason `holdable` accepts stays held with every entry after it, so order is kept.
   */
  write(batch: readonly Held[]): Promise<Array<PromiseSettledResult<R>>>;
  /** The entry is stored: hand it on (queue its turn). Called in arrival order. */
  stored(entry: Held, result: R): void;
  /** Whether a write failure means "storage cannot take it now" (keep holding) rather than a bug. */
  holdable(err: unknown): boolean;
  /**
   * How long after its `receivedAt` a synthetic message (a schedule's or a reminder's firing)
   * may still be stored: the intake's duplicate window. Other instances fire the same schedule,
   * and a reminder whose claim lapses is fired again elsewhere, under the same id; stored
   * later than this, a held firing would no longer be recognised as that one and would run
   * a second turn.
   */
  syntheticWindowMs(): number;
  /** Sends a short notice to the message's conversation; never rejects. */
  notify(msg: ChannelMessage, text: string): void;
  /** The number held in a channel changed (the metric). */
  counted(channelId: string, held: number): void;
  log: Logger;
}

interface ChannelHold {
  queue: Held[];
  bytes: number;
  readonly byKey: Map<string, Held>;
  /** Conversations told during this episode (until the channel's hold empties): at most once each. */
  readonly told: Map<string, 'held' | 'not_kept'>;
  loop: Promise<void> | undefined;
}

/**
 * What a listener received while the store could not take writes, held in memory per
 * channel (bounded by count and bytes) and written with backoff until the store takes it,
 * in arrival order. The deliver call of a held message resolves once it is stored, so a
 * platform with acks (an update offset, an envelope ack) is acknowledged only then, and one
 * that never redelivers loses nothing while the process lives. While a channel holds
 * anything its new messages queue behind (so each conversation keeps its order). A process
 * that dies loses what it held; the platforms with acks deliver it again.
 */
export class IntakeHold<R> {
  readonly #o: IntakeHoldOptions<R>;
  readonly #channels = new Map<string, ChannelHold>();
  readonly #closing = new AbortController();

  constructor(options: IntakeHoldOptions<R>) {
    this.#o = options;
  }

  /** Whether `channelId` holds messages now: a new one must join them, not overtake them. */
  holding(channelId: string): boolean {
    return (this.#channels.get(channelId)?.queue.length ?? 0) > 0;
  }

  /** Messages held per channel, for /status. */
  count(channelId: string): number {
    return this.#channels.get(channelId)?.queue.length ?? 0;
  }

  /**
   * Holds `msg` until it is stored (resolves true then). Past the channel's bound it is
   * refused: its conversation is told it was not kept, and this rejects with
   * STORAGE_UNAVAILABLE (retryable), so an adapter with acks does not acknowledge it.
   */
  hold(msg: ChannelMessage, scope: string, passive: ChannelMessage[], why: string): Promise<boolean> {
    if (this.#closing.signal.aborted) return Promise.reject(new CodedError('DAEMON_SHUTTING_DOWN', 'the daemon is stopping', { retryable: true }));
    const ch = this.#channel(msg.channelId);
    const key = `${msg.channelId}\u0000${msg.messageId}`;
    const same = ch.byKey.get(key);
    // A redelivery of a held message waits on the same write.
    if (same) return new Promise((resolve, reject) => same.waiters.push({ resolve, reject }));
    const bytes = Buffer.byteLength(JSON.stringify(msg)) + (passive.length ? Buffer.byteLength(JSON.stringify(passive)) : 0);
    const { messages, bytes: maxBytes } = this.#o.limits();
    if (ch.queue.length + 1 > messages || ch.bytes + bytes > maxBytes) {
      this.#o.log.warn(
        { channel: msg.channelId, messageId: msg.messageId, held: ch.queue.length, heldBytes: ch.bytes },
        'storage unavailable and the hold is full: message refused',
      );
      // Nobody sent a firing: there is no one to ask to send it again.
      if (!msg.synthetic && ch.told.get(scope) !== 'not_kept') {
        ch.told.set(scope, 'not_kept');
        this.#o.notify(msg, NOT_KEPT_REPLY);
      }
      // A message larger than the whole bound, with nothing held: no episode to remember.
      if (!ch.queue.length) this.#channels.delete(msg.channelId);
      return Promise.reject(new CodedError('STORAGE_UNAVAILABLE', `the message was not stored and the hold is full (${why})`, { retryable: true }));
    }
    const entry: Held = { msg, scope, passive, bytes, sinceMs: Date.now(), waiters: [] };
    const done = new Promise<boolean>((resolve, reject) => entry.waiters.push({ resolve, reject }));
    if (!ch.queue.length) this.#o.log.warn({ channel: msg.channelId, why }, 'storage cannot take new messages: holding them in memory until it can');
    ch.queue.push(entry);
    ch.byKey.set(key, entry);
    ch.bytes += bytes;
    this.#o.counted(msg.channelId, ch.queue.length);
    ch.loop ??= this.#drain(msg.channelId, ch).finally(() => (ch.loop = undefined));
    return done;
  }

  /**
   * A channel's listener stops: the deliver calls waiting on its held messages are let go
   * (rejected, so nothing is acknowledged that is not stored). A changed channel's messages
   * stay held and are answered by its new listener's adapter; a removed channel's are dropped.
   */
  release(channelId: string, drop: boolean): void {
    const ch = this.#channels.get(channelId);
    if (!ch) return;
    const err = new CodedError('CHANNEL_STOPPING', `channel "${channelId}" is stopping; the message is not stored yet`);
    for (const h of ch.queue) for (const w of h.waiters.splice(0)) w.reject(err);
    if (!drop) return;
    if (ch.queue.length)
      this.#o.log.warn({ channel: channelId, dropped: ch.queue.length }, 'a removed channel had messages held for storage: they are dropped');
    // Its drain loop ends on the empty queue.
    ch.queue = [];
    ch.byKey.clear();
    ch.bytes = 0;
    this.#channels.delete(channelId);
    this.#o.counted(channelId, 0);
  }

  /**
   * Shutdown: stops retrying, tries one last write of everything held, and lets every
   * waiting deliver call go. Returns how many messages could not be stored (lost, unless
   * their platform delivers them again).
   */
  async close(): Promise<number> {
    this.#closing.abort();
    await Promise.all([...this.#channels.values()].map((ch) => ch.loop));
    let lost = 0;
    for (const [id, ch] of this.#channels) {
      this.#expire(ch);
      if (ch.queue.length) await this.#attempt(ch);
      const err = new CodedError('DAEMON_SHUTTING_DOWN', 'the daemon stopped before storage took this message', { retryable: true });
      for (const h of ch.queue) for (const w of h.waiters.splice(0)) w.reject(err);
      if (ch.queue.length)
        this.#o.log.error(
          { channel: id, lost: ch.queue.length },
          'stopped while storage still refused writes: held messages are lost unless the platform delivers them again',
        );
      lost += ch.queue.length;
      this.#o.counted(id, 0);
    }
    this.#channels.clear();
    return lost;
  }

  #channel(id: string): ChannelHold {
    let ch = this.#channels.get(id);
    if (!ch) this.#channels.set(id, (ch = { queue: [], bytes: 0, byKey: new Map(), told: new Map(), loop: undefined }));
    return ch;
  }

  async #drain(channelId: string, ch: ChannelHold): Promise<void> {
    const signal = this.#closing.signal;
    let delayMs = HOLD_RETRY_FIRST_MS;
    while (ch.queue.length && !signal.aborted) {
      this.#expire(ch);
      if (!ch.queue.length) break;
      if (await this.#attempt(ch)) {
        delayMs = HOLD_RETRY_FIRST_MS;
        continue;
      }
      this.#tell(ch);
      await sleep(delayMs, signal);
      delayMs = Math.min(HOLD_RETRY_MAX_MS, delayMs * 2);
    }
    if (ch.queue.length || signal.aborted || this.#channels.get(channelId) !== ch) return;
    // The episode is over: the next fault may tell each conversation again.
    this.#channels.delete(channelId);
    this.#o.log.info({ channel: channelId }, 'no message held any more: stored, or let go (see above)');
  }

  /** One write of the oldest held messages; true when some were stored (or dropped as bad). */
  async #attempt(ch: ChannelHold): Promise<boolean> {
    const batch = ch.queue.slice(0, HOLD_BATCH);
    let results: Array<PromiseSettledResult<R>>;
    try {
      results = await this.#o.write(batch);
    } catch (err) {
      results = batch.map(() => ({ status: 'rejected', reason: err }));
    }
    let n = 0;
    for (const [i, r] of results.entries()) {
      const h = batch[i]!;
      if (r.status === 'rejected' && this.#o.holdable(r.reason)) break;
      n++;
      ch.byKey.delete(`${h.msg.channelId}\u0000${h.msg.messageId}`);
      ch.bytes -= h.bytes;
      if (r.status === 'fulfilled') {
        this.#o.stored(h, r.value);
        for (const w of h.waiters.splice(0)) w.resolve(true);
      } else {
        // Not a storage fault: a bug (retrying cannot help, and it must not hold the others), or
        // a firing the full inbox refused (INBOX_FULL: its caller tries it again).
        const fields = { err: r.reason, channel: h.msg.channelId, messageId: h.msg.messageId };
        if (r.reason instanceof CodedError && r.reason.code === 'INBOX_FULL') this.#o.log.warn(fields, 'a held firing was refused: the inbox is full');
        else this.#o.log.error(fields, 'a held message could not be stored and is dropped');
        for (const w of h.waiters.splice(0)) w.reject(r.reason);
      }
    }
    if (!n) return false;
    ch.queue = ch.queue.slice(n);
    this.#o.counted(batch[0]!.msg.channelId, ch.queue.length);
    return true;
  }

  /**
   * Lets go of the firings held past the duplicate window (their deliver calls reject with
   * FIRING_EXPIRED): the drain retries at most every HOLD_RETRY_MAX_MS, and the window
   * leaves room for that and one write inside the stream's own.
   */
  #expire(ch: ChannelHold): void {
    const oldestMs = Date.now() - this.#o.syntheticWindowMs();
    const expired = ch.queue.filter((h) => h.msg.synthetic && h.msg.receivedAt <= oldestMs);
    if (!expired.length) return;
    ch.queue = ch.queue.filter((h) => !expired.includes(h));
    for (const h of expired) {
      ch.byKey.delete(`${h.msg.channelId}\u0000${h.msg.messageId}`);
      ch.bytes -= h.bytes;
      this.#o.log.warn(
        { channel: h.msg.channelId, messageId: h.msg.messageId, synthetic: h.msg.synthetic?.kind },
        'a firing waited for storage past the duplicate window: let go so it cannot run twice',
      );
      const err = new CodedError('FIRING_EXPIRED', `the firing ${h.msg.messageId} was not stored within the duplicate window`, { retryable: true });
      for (const w of h.waiters.splice(0)) w.reject(err);
    }
    this.#o.counted(expired[0]!.msg.channelId, ch.queue.length);
  }

  /** Each conversation with a message held for HOLD_NOTICE_AFTER_MS is told once per episode (a firing is nobody's message). */
  #tell(ch: ChannelHold): void {
    const now = Date.now();
    for (const h of ch.queue) {
      if (now - h.sinceMs < HOLD_NOTICE_AFTER_MS) break;
      if (h.msg.synthetic || ch.told.has(h.scope)) continue;
      ch.told.set(h.scope, 'held');
      this.#o.notify(h.msg, HELD_REPLY);
    }
  }
}
