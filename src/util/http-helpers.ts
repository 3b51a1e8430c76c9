import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';

/** HTTP helpers shared by the daemon's server, the management API and channels' webhooks. */

export function isLoopback(address: string | undefined): boolean {
  if (!address) return false;
  return address === '::1' || address.startsWith('127.') || address.startsWith('::ffff:127.');
}

/** Headers a proxy adds: a request carrying one came from somewhere else, whatever its socket says. */
const PROXY_HEADERS = ['forwarded', 'x-forwarded-for', 'x-real-ip'] as const;

/**
 * Whether the client is on this machine. A same-host reverse proxy connects from loopback
 * on behalf of remote clients, so a request carrying `Forwarded` / `X-Forwarded-For`
 * (or `X-Real-IP`) is never loopback.
 */
export function isLoopbackClient(req: Pick<IncomingMessage, 'headers' | 'socket'>): boolean {
  if (PROXY_HEADERS.some((h) => req.headers[h] !== undefined)) return false;
  return isLoopback(req.socket.remoteAddress);
}

/** The host part of a `Host` header or URL host (`[::1]:8787` → `::1`), lower-cased. */
export function hostName(host: string): string {
  const h = host.trim().toLowerCase();
  if (h.startsWith('[')) return h.slice(1, h.indexOf(']') >>> 0);
  const i = h.lastIndexOf(':');
  return (i >= 0 && h.indexOf(':') === i ? h.slice(0, i) : h).replace(/\.$/, '');
}

function isLoopbackName(name: string): boolean {
  return name === 'localhost' || name.endsWith('.localhost') || /^127(\.\d{1,3}){3}$/.test(name) || name === '::1' || name === '::ffff:127.0.0.1';
}

/**
 * The names the daemon answers to: the configured listen host, `localhost`, loopback
 * literals and `[http] allowed_hosts`. Anything else is a DNS-rebinding attempt (a
 * foreign name resolving to this machine) or a misconfiguration.
 */
export function hostAllowed(host: string | undefined, allowed: readonly string[]): boolean {
  if (!host) return false;
  const name = hostName(host);
  return isLoopbackName(name) || allowed.some((a) => hostName(a) === name);
}

/**
 * An `Origin` header of the page the daemon serves: the exact host (with port) the request
 * was sent to, or a name in `[http] allowed_hosts` (a proxy's public name). Loopback names
 * on other ports are other local web apps, not this page.
 */
export function originAllowed(origin: string, host: string | undefined, allowed: readonly string[]): boolean {
  try {
    const u = new URL(origin);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return false;
    if (host !== undefined && u.host === host.trim().toLowerCase()) return true;
    return allowed.some((a) => hostName(a) === hostName(u.host));
  } catch {
    return false;
  }
}

/**
 * Whether a state-changing request is the daemon's own page or a non-browser client: a
 * JSON body (a cross-site form or `text/plain` fetch cannot send one without a preflight
 * we never answer) and an `Origin` that is absent or exactly this daemon's.
 */
export function sameOriginJson(req: Pick<IncomingMessage, 'headers'>): 'ok' | 'not_json' | 'foreign_origin' {
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/json') return 'not_json';
  const origin = req.headers.origin;
  if (origin === undefined) return 'ok';
  try {
    return new URL(origin).host === (req.headers.host ?? '').toLowerCase() ? 'ok' : 'foreign_origin';
  } catch {
    return 'foreign_origin';
  }
}

/** Headers for every HTML page: no framing (clickjacking), no content sniffing. */
export function pageHeaders(csp: string): Record<string, string> {
  return {
    'content-type': 'text/html; charset=utf-8',
    'cache-control': 'no-store',
    'content-security-policy': `${csp}; frame-ancestors 'none'`,
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'DENY',
  };
}

/** Compares two secrets in constant time (hashing first, so lengths do not leak either). */
export function secretEquals(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

/**
 * How long a webhook's body may take to arrive once its handler reads it: a platform posts
 * a few KB at once, so only a client trickling bytes to hold a socket and memory is this slow.
 */
export const BODY_TIMEOUT_MS = 10_000;

/**
 * A refusal that ends the connection. Every refusal before the whole body is in needs it:
 * the unread rest (a declared 2 GB, a trickle) would otherwise keep the socket open for
 * keep-alive until Node's request timeout, minutes away.
 */
export function refuseAndClose(res: ServerResponse, status: number, text = ''): void {
  res.writeHead(status, { 'content-type': 'text/plain', connection: 'close' }).end(text);
}

/**
 * A WebSocket handshake refused before the upgrade (`status` like `'429 Too Many Requests'`):
 * a plain HTTP answer, then the socket ends. `headers` are extra lines such as `Retry-After: 10`.
 */
export function refuseUpgrade(socket: Duplex, status: string, headers: readonly string[] = []): void {
  socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\n${headers.map((h) => `${h}\r\n`).join('')}Content-Length: 0\r\n\r\n`);
}

/**
 * The request body, refused past `limitBytes` (the caller answers 413 with refuseAndClose) and, given
 * `timeoutMs`, when it has not all arrived by then: 'timeout', the bytes read so far
 * dropped (the caller answers 408 with `Connection: close`, which ends the socket).
 */
export function readBody(req: IncomingMessage, limitBytes: number): Promise<Buffer | 'too_large'>;
export function readBody(req: IncomingMessage, limitBytes: number, timeoutMs: number): Promise<Buffer | 'too_large' | 'timeout'>;
export async function readBody(req: IncomingMessage, limitBytes: number, timeoutMs?: number): Promise<Buffer | 'too_large' | 'timeout'> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > limitBytes) {
    req.resume();
    return 'too_large';
  }
  let timer: NodeJS.Timeout | undefined;
  const late = timeoutMs === undefined ? undefined : new Promise<'timeout'>((r) => void (timer = setTimeout(r, timeoutMs, 'timeout')));
  const chunks = req[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  const parts: Buffer[] = [];
  let size = 0;
  try {
    for (;;) {
      // Not returned on a timeout: that would destroy the socket before the 408 goes out.
      const next = await (late ? Promise.race([chunks.next(), late]) : chunks.next());
      if (next === 'timeout') return next;
      if (next.done) return Buffer.concat(parts);
      size += next.value.length;
      if (size > limitBytes) {
        req.resume();
        await chunks.return?.();
        return 'too_large';
      }
      parts.push(next.value);
    }
  } finally {
    clearTimeout(timer);
  }
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store' });
  res.end(text);
}

export function parseListen(listen: string): { host: string; port: number } {
  const i = listen.lastIndexOf(':');
  return { host: listen.slice(0, i).replace(/^\[|\]$/g, ''), port: Number(listen.slice(i + 1)) };
}

const eventStreams = new WeakSet<ServerResponse>();

/**
 * Starts a server-sent event stream on `res`: a 200 with `headers` and the event-stream type.
 * At an upgrade's hand-over the HTTP server cuts the streams it still serves (an event
 * stream never ends on its own, and its client reconnects, to the new process).
 */
export function openEventStream(res: ServerResponse, headers: OutgoingHttpHeaders = {}): void {
  eventStreams.add(res);
  res.writeHead(200, { ...headers, 'content-type': 'text/event-stream' });
}

/** Whether `res` is an event stream openEventStream started. */
export const isEventStream = (res: ServerResponse): boolean => eventStreams.has(res);
