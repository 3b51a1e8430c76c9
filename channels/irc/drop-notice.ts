import type { Logger } from 'pino';
import { NOT_KEPT_REPLY } from '../../src/contracts/topology.js';
import type { TokenBucket } from './bucket.js';
import { formatLine, ircLower } from './protocol.js';

/** A sender is told at most once in this long, however many of their messages are dropped. */
export const NOTICE_EVERY_MS = 60_000;
/** Senders remembered as told at once: past it (a flood of distinct nicks) nobody new is told until the oldest expire. */
const MAX_TOLD = 200;
/** Notices waiting for the send bucket at once: more are not sent, so a flood cannot build a queue of them. */
const MAX_WAITING = 5;

/** Why a dropped message's sender was or was not told (logged with the drop). */
export type NoticeOutcome = 'telling the sender' | 'sender told within the last minute' | 'too many notices already';

/**
 * Tells the sender of a dropped message that it was not kept, with a NOTICE (RFC 2812: the
 * reply automatic software sends, which no client answers automatically). Bounded so a
 * flood cannot make the bot flood: once per sender per NOTICE_EVERY_MS, each notice paced by
 * the adapter's send bucket like every other line, and few waiting for it at once.
 */
export class DropNotices {
  /** ircLower(nick) → when told (ms); entries older than NOTICE_EVERY_MS are pruned. */
  readonly #told = new Map<string, number>();
  #waiting = 0;

  constructor(
    private readonly bucket: TokenBucket,
    private readonly log: Logger,
    private readonly channelId: string,
  ) {}

  /** Sends the notice to `nick` unless a bound says not to; `write` puts one line on the connection (false when it is gone). */
  tell(nick: string, signal: AbortSignal, write: (line: string) => boolean): NoticeOutcome {
    const now = Date.now();
    // Map order is insertion order, and a told time is only ever set to now: the oldest are first.
    for (const [key, at] of this.#told) {
      if (now - at < NOTICE_EVERY_MS) break;
      this.#told.delete(key);
    }
    const key = ircLower(nick);
    if (this.#told.has(key)) return 'sender told within the last minute';
    if (this.#told.size >= MAX_TOLD || this.#waiting >= MAX_WAITING) return 'too many notices already';
    this.#told.set(key, now);
    this.#waiting++;
    this.bucket
      .take(signal)
      .then(() => {
        if (!write(formatLine('NOTICE', nick, NOT_KEPT_REPLY)))
          this.log.warn({ channel: this.channelId, to: nick }, 'IRC "not kept" notice not sent: the connection is gone');
      })
      .catch((err: unknown) => this.log.warn({ err, channel: this.channelId, to: nick }, 'IRC "not kept" notice not sent'))
      .finally(() => this.#waiting--);
    return 'telling the sender';
  }
}
