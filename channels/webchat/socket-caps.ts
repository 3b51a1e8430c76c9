import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { refuseUpgrade } from '../../src/util/http-helpers.js';

/**
 * How many WebSockets a web chat holds open. Every open socket costs memory and is sent each
 * of its tab's frames, so a client that may connect (loopback, or anyone with the access
 * token) must not open them without end. A browser tab holds one; a tab the browser
 * duplicates shares its id (sessionStorage is copied), so a few per tab are normal.
 */
export interface SocketCaps {
  /** Sockets one tab may hold open at once. */
  perTab: number;
  /** Sockets one web chat channel holds open at once, all tabs together. */
  total: number;
}

export const DEFAULT_SOCKET_CAPS: SocketCaps = { perTab: 8, total: 1024 };

/** Asks a client other than the page to wait this long (a browser's WebSocket never sees the answer; the page keeps its own backoff). */
const RETRY_AFTER_S = 10;
/** A flood of refused handshakes is logged once per this long, with how many were refused. */
const WARN_EVERY_MS = 60_000;

/**
 * Admits a WebSocket handshake within the caps, or refuses it with 429 before the upgrade.
 * Refusals are counted and logged at most once a minute; those after a warning are reported
 * when the minute is over (or the channel stops), not left for a next refusal that may not come.
 */
export class SocketLimit {
  readonly #caps: SocketCaps;
  readonly #log: Logger;
  readonly #channel: string;
  #refused = 0;
  #reason = '';
  #warnedAtMs = Number.NEGATIVE_INFINITY;
  #trailing: NodeJS.Timeout | undefined;

  /** `signal`: the channel's run; when it ends, refusals not yet reported are. */
  constructor(caps: SocketCaps, log: Logger, channel: string, signal: AbortSignal) {
    this.#caps = caps;
    this.#log = log;
    this.#channel = channel;
    signal.addEventListener('abort', () => this.#report(), { once: true });
  }

  /**
   * True when one more socket is taken for a tab holding `tabSockets` while the channel holds
   * `allSockets` (both counted before this one); otherwise `socket` has been answered 429.
   */
  admit(socket: Duplex, tabSockets: number, allSockets: number): boolean {
    const why =
      tabSockets >= this.#caps.perTab
        ? `a tab may hold ${this.#caps.perTab} connections at once`
        : allSockets >= this.#caps.total
          ? `the channel holds ${this.#caps.total} connections at once`
          : undefined;
    if (why === undefined) return true;
    refuseUpgrade(socket, '429 Too Many Requests', [`Retry-After: ${RETRY_AFTER_S}`]);
    this.#refused++;
    this.#reason = why;
    const waitMs = this.#warnedAtMs + WARN_EVERY_MS - Date.now();
    if (waitMs <= 0) this.#report();
    else this.#trailing ??= setTimeout(() => this.#report(), waitMs).unref();
    return false;
  }

  #report(): void {
    clearTimeout(this.#trailing);
    this.#trailing = undefined;
    if (this.#refused === 0) return;
    this.#log.warn({ channel: this.#channel, refused: this.#refused, reason: this.#reason }, 'web chat connections refused: too many open');
    this.#warnedAtMs = Date.now();
    this.#refused = 0;
  }
}
