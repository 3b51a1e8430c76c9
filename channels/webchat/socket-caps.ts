import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { refuseUpgrade, sendJson } from '../../src/util/http-helpers.js';

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
  readonly #signal: AbortSignal;

  /** `signal`: the channel's run; when it ends, refusals not yet reported are (and later ones at once). */
  constructor(caps: SocketCaps, log: Logger, channel: string, signal: AbortSignal) {
    this.#caps = caps;
    this.#log = log;
    this.#channel = channel;
    this.#signal = signal;
    signal.addEventListener('abort', () => this.#report(), { once: true });
  }

  /**
   * True when one more socket is taken for a tab holding `tabSockets` while the channel holds
   * `allSockets` (both counted before this one); otherwise `socket` has been answered 429.
   */
  admit(socket: Duplex, tabSockets: number, allSockets: number): boolean {
    const why = this.refusal(tabSockets, allSockets);
    if (why === undefined) return true;
    refuseUpgrade(socket, '429 Too Many Requests', [`Retry-After: ${RETRY_AFTER_S}`]);
    this.#refused++;
    this.#reason = why;
    // At most a minute even if the clock stepped back since the last warning.
    const waitMs = Math.min(this.#warnedAtMs + WARN_EVERY_MS - Date.now(), WARN_EVERY_MS);
    if (waitMs <= 0 || this.#signal.aborted) this.#report();
    else this.#trailing ??= setTimeout(() => this.#report(), waitMs).unref();
    return false;
  }

  /** Why one more socket is refused for a tab holding `tabSockets` while the channel holds `allSockets`, or undefined. */
  refusal(tabSockets: number, allSockets: number): string | undefined {
    if (tabSockets >= this.#caps.perTab) return `a tab may hold ${this.#caps.perTab} connections at once`;
    if (allSockets >= this.#caps.total) return `the channel holds ${this.#caps.total} connections at once`;
    return undefined;
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

/**
 * The page's question after a handshake failed, since a browser's WebSocket never sees the
 * handshake's status: would a socket be taken now, and if not, why. A body-less POST, so a
 * browser sends its Origin and another site's page cannot use it to try tokens. 204: yes (the
 * daemon was away, or the refusal is over); 403: not from this origin (as the handshake);
 * 401: not with this token (or, without one, not from this client); 429: a cap is reached,
 * `error` says which. Counts nothing and takes nothing.
 */
export function answerConnectCheck(
  req: IncomingMessage,
  res: ServerResponse,
  may: { ownOrigin: boolean; authorized: boolean; hasToken: boolean },
  refusal: string | undefined,
): void {
  req.resume();
  if (!may.ownOrigin) sendJson(res, 403, { error: "this page's origin is not allowed: add its host to [http] allowed_hosts" });
  else if (!may.authorized) {
    const error = may.hasToken ? 'the access token was refused' : 'without an access token this web chat takes connections only from its own machine';
    sendJson(res, 401, { error });
  } else if (refusal === undefined) res.writeHead(204, { 'cache-control': 'no-store' }).end();
  else {
    res.setHeader('retry-after', String(RETRY_AFTER_S));
    sendJson(res, 429, { error: refusal });
  }
}
