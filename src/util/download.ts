import { CodedError } from '../contracts/errors.js';
import { addressesOf, isLocalAddress } from './address-policy.js';

/** Redirects a download follows; more is a loop or a trick. */
export const MAX_DOWNLOAD_REDIRECTS = 3;
/** A download that receives nothing for this long is given up (a stalled transfer holds a turn). */
export const DOWNLOAD_IDLE_TIMEOUT_MS = 10_000;

export interface LimitedFetchOptions {
  maxBytes: number;
  signal: AbortSignal;
  /** Sent to the first URL's origin only, never to a host a redirect leads to. */
  headers?: Record<string, string>;
  /** What the file is called in errors. */
  name: string;
  /** An HTML answer is a sign-in page, not the file (a platform may send one when the token may not read files). */
  htmlMeansRefused?: boolean;
  /** Said after such a refusal, to the user too: what the platform may want (e.g. a token scope). */
  refusedHint?: string;
  /** Nothing received for this long ends the download with ATTACHMENT_TIMEOUT. */
  idleTimeoutMs?: number;
  /** Which addresses count as local (tests stand in a public address); isLocalAddress by default. */
  isLocal?: (address: string) => boolean;
}

function tooLarge(name: string, bytes: number, maxBytes: number): CodedError {
  return new CodedError('ATTACHMENT_TOO_LARGE', `${name} has ${bytes} bytes, more than ${maxBytes}`);
}

/** Refuses a file whose known size passes the limit, before anything is transferred. */
export function checkSize(name: string, size: number | undefined, maxBytes: number): void {
  if (size !== undefined && size > maxBytes) throw tooLarge(name, size, maxBytes);
}

async function isLocalHost(url: URL, isLocal: (a: string) => boolean): Promise<boolean> {
  return (await addressesOf(url.hostname)).some(isLocal);
}

/**
 * GETs a file into memory with a byte limit: a Content-Length over it is refused before the
 * body is read, and a body that grows past it is cut off there. Redirects are followed by
 * hand: at most MAX_DOWNLOAD_REDIRECTS, only http(s), never from a public address to a local
 * one (a platform's file URL must not lead to the daemon's own API), and the caller's
 * headers (its credentials) go to the first URL's origin only. A body that stalls for
 * `idleTimeoutMs` ends with ATTACHMENT_TIMEOUT; the total time is the caller's `signal`.
 */
export async function fetchLimited(url: string, o: LimitedFetchOptions): Promise<Buffer> {
  const isLocal = o.isLocal ?? isLocalAddress;
  const idle = new AbortController();
  const signal = AbortSignal.any([o.signal, idle.signal]);
  const idleMs = o.idleTimeoutMs ?? DOWNLOAD_IDLE_TIMEOUT_MS;
  let timer: NodeJS.Timeout | undefined;
  const touch = () => {
    clearTimeout(timer);
    timer = setTimeout(() => idle.abort(new CodedError('ATTACHMENT_TIMEOUT', `${o.name}: nothing arrived for ${idleMs} ms`)), idleMs);
  };
  const fail = (err: unknown): never => {
    if (o.signal.aborted) throw o.signal.reason ?? err;
    if (idle.signal.aborted) throw idle.signal.reason;
    if (err instanceof CodedError) throw err;
    throw new CodedError('ATTACHMENT_UNAVAILABLE', `${o.name}: ${(err as Error).message}`, { cause: err });
  };
  try {
    touch();
    const first = new URL(url);
    let res: Response;
    try {
      const startedLocal = await isLocalHost(first, isLocal);
      let current = first;
      for (let hop = 0; ; hop++) {
        if (current.protocol !== 'http:' && current.protocol !== 'https:')
          throw new CodedError('ATTACHMENT_UNAVAILABLE', `${o.name}: refused a redirect to a ${current.protocol} URL`);
        if (!startedLocal && (await isLocalHost(current, isLocal)))
          throw new CodedError('ATTACHMENT_UNAVAILABLE', `${o.name}: refused a redirect to a local address (${current.host})`);
        const headers = current.origin === first.origin ? (o.headers ?? {}) : {};
        res = await fetch(current, { headers, signal, redirect: 'manual' });
        const location = res.status >= 300 && res.status < 400 ? res.headers.get('location') : null;
        if (location === null) break;
        await res.body?.cancel().catch(() => {});
        if (hop >= MAX_DOWNLOAD_REDIRECTS) throw new CodedError('ATTACHMENT_UNAVAILABLE', `${o.name}: more than ${MAX_DOWNLOAD_REDIRECTS} redirects`);
        current = new URL(location, current);
      }
    } catch (err) {
      return fail(err);
    }
    if (!res.ok || !res.body) {
      await res.body?.cancel().catch(() => {});
      throw new CodedError('ATTACHMENT_UNAVAILABLE', `${o.name}: HTTP ${res.status}`);
    }
    if (o.htmlMeansRefused && (res.headers.get('content-type') ?? '').startsWith('text/html')) {
      await res.body.cancel().catch(() => {});
      const hint = o.refusedHint ? ` (${o.refusedHint})` : '';
      throw new CodedError('ATTACHMENT_UNAVAILABLE', `${o.name}: the platform answered with a web page instead of the file${hint}`);
    }
    const declared = Number(res.headers.get('content-length') ?? NaN);
    if (Number.isFinite(declared) && declared > o.maxBytes) {
      await res.body.cancel().catch(() => {});
      throw tooLarge(o.name, declared, o.maxBytes);
    }
    const parts: Uint8Array[] = [];
    let total = 0;
    const reader = res.body.getReader();
    try {
      for (;;) {
        touch();
        const { done, value } = await reader.read().catch(fail);
        if (done) break;
        total += value.byteLength;
        if (total > o.maxBytes) throw tooLarge(o.name, total, o.maxBytes);
        parts.push(value);
      }
    } finally {
      await reader.cancel().catch(() => {});
    }
    return Buffer.concat(parts);
  } finally {
    clearTimeout(timer);
  }
}
