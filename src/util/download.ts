import { CodedError } from '../contracts/errors.js';

export interface LimitedFetchOptions {
  maxBytes: number;
  signal: AbortSignal;
  headers?: Record<string, string>;
  /** What the file is called in errors. */
  name: string;
  /** An HTML answer is a sign-in page, not the file (a platform may send one when the token may not read files). */
  htmlMeansRefused?: boolean;
}

function tooLarge(name: string, bytes: number, maxBytes: number): CodedError {
  return new CodedError('ATTACHMENT_TOO_LARGE', `${name} has ${bytes} bytes, more than ${maxBytes}`);
}

/** Refuses a file whose known size passes the limit, before anything is transferred. */
export function checkSize(name: string, size: number | undefined, maxBytes: number): void {
  if (size !== undefined && size > maxBytes) throw tooLarge(name, size, maxBytes);
}

/**
 * GETs a file into memory with a byte limit: a Content-Length over it is refused before the
 * body is read, and a body that grows past it is cut off there.
 */
export async function fetchLimited(url: string, o: LimitedFetchOptions): Promise<Buffer> {
  let res: Response;
  try {
    res = await fetch(url, { headers: o.headers ?? {}, signal: o.signal, redirect: 'follow' });
  } catch (err) {
    if (o.signal.aborted) throw err;
    throw new CodedError('ATTACHMENT_UNAVAILABLE', `${o.name}: ${(err as Error).message}`, { cause: err });
  }
  if (!res.ok || !res.body) {
    await res.body?.cancel().catch(() => {});
    throw new CodedError('ATTACHMENT_UNAVAILABLE', `${o.name}: HTTP ${res.status}`);
  }
  if (o.htmlMeansRefused && (res.headers.get('content-type') ?? '').startsWith('text/html')) {
    await res.body.cancel().catch(() => {});
    throw new CodedError('ATTACHMENT_UNAVAILABLE', `${o.name}: the platform answered with a web page instead of the file (does the token have files:read?)`);
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
      const { done, value } = await reader.read();
      if (done) break;
      total += value.byteLength;
      if (total > o.maxBytes) throw tooLarge(o.name, total, o.maxBytes);
      parts.push(value);
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  return Buffer.concat(parts);
}
