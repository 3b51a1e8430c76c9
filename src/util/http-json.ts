import type { Readable } from 'node:stream';
import { Agent } from 'undici';

/** One answer of a REST call, its body read as text within the caller's limit. */
export interface HttpAnswer {
  status: number;
  ok: boolean;
  /** A response header by its lower-case name; undefined when absent. */
  header(name: string): string | undefined;
  text: string;
  /** The text as JSON: `{}` for an empty body, undefined when it is not JSON. */
  json: unknown;
  /** The answer was larger than `maxAnswerBytes`: not read (text empty, json undefined). */
  tooLarge: boolean;
}

export interface HttpJsonRequest {
  method: string;
  headers: Record<string, string>;
  /** Already serialized (the callers send JSON). */
  body?: string;
  signal: AbortSignal;
  /** The most of the answer read: a declared length over it is refused before reading, a body growing past it is cut off. */
  maxAnswerBytes: number;
}

/**
 * Keep-alive connections per origin for the platforms' REST calls, one agent per process as
 * global `fetch` has its own dispatcher; idle sockets close after KEEP_ALIVE_MS and never hold
 * the process open.
 */
const KEEP_ALIVE_MS = 30_000;
let agent: Agent | undefined;

/** The process's agent for platform REST calls (made on first use). */
export function platformAgent(): Agent {
  agent ??= new Agent({ connections: 64, keepAliveTimeout: KEEP_ALIVE_MS });
  return agent;
}

/**
 * An answer's body within `maxBytes`: undefined when it is larger (a declared length over it
 * is refused before reading, a body growing past it is cut off). A body left unread is
 * destroyed, and undici then emits an "aborted" error on it: heard here, or it would be an
 * uncaught exception.
 */
export async function readBounded(body: Readable, declaredLength: string | string[] | undefined, maxBytes: number): Promise<Buffer | undefined> {
  const discard = () => {
    body.on('error', () => {});
    body.destroy();
  };
  if (Number(declaredLength ?? 0) > maxBytes) {
    discard();
    return undefined;
  }
  const parts: Buffer[] = [];
  let total = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    total += chunk.byteLength;
    if (total > maxBytes) {
      discard();
      return undefined;
    }
    parts.push(chunk);
  }
  return Buffer.concat(parts);
}

/**
 * A platform REST call (for the adapters that speak their platform's JSON API themselves) through
 * undici's `Agent.request` rather than global `fetch`: fetch builds a WHATWG Request, Headers
 * and a web stream for every call, about 3× the client CPU of a small JSON call
 * (`test/bench/http-client.ts`). The caller's signal is passed as it is. A redirect is never
 * followed: a 3xx is an answer like any other non-2xx, so a token never travels to another
 * host. An answer larger than `maxAnswerBytes` is not read: `tooLarge` says so.
 */
export async function httpJson(url: string, o: HttpJsonRequest): Promise<HttpAnswer> {
  const target = new URL(url);
  const res = await platformAgent().request({
    origin: target.origin,
    path: `${target.pathname}${target.search}`,
    method: o.method as 'GET',
    headers: o.headers,
    ...(o.body !== undefined ? { body: o.body } : {}),
    signal: o.signal,
  });
  const headers = res.headers;
  const bytes = await readBounded(res.body, headers['content-length'], o.maxAnswerBytes);
  const text = bytes?.toString('utf8') ?? '';
  return {
    status: res.statusCode,
    ok: res.statusCode >= 200 && res.statusCode < 300,
    header: (name) => {
      const v = headers[name];
      return Array.isArray(v) ? v.join(', ') : v;
    },
    text,
    json: bytes ? jsonOf(text) : undefined,
    tooLarge: !bytes,
  };
}

function jsonOf(text: string): unknown {
  if (!text) return {};
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}
