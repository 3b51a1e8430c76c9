import { Agent } from 'undici';
import { dispatchAnswer } from './dispatch-answer.js';

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
 * A platform REST call (for the adapters that speak their platform's JSON API themselves) through
 * the process's undici agent (src/util/dispatch-answer.ts) rather than global `fetch`: fetch
 * builds a WHATWG Request, Headers and a web stream for every call, about 3× the client CPU of
 * a small JSON call (`test/bench/http-client.ts`). The caller's signal cuts it at any point.
 * A redirect is never followed: a 3xx is an answer like any other non-2xx, so a token never
 * travels to another host. An answer larger than `maxAnswerBytes` is not read: `tooLarge` says so.
 */
export async function httpJson(url: string, o: HttpJsonRequest): Promise<HttpAnswer> {
  const target = new URL(url);
  const { status, headers, body } = await dispatchAnswer(
    platformAgent(),
    {
      origin: target.origin,
      path: `${target.pathname}${target.search}`,
      method: o.method as 'GET',
      headers: o.headers,
      ...(o.body !== undefined ? { body: o.body } : {}),
    },
    o.signal,
    o.maxAnswerBytes,
  );
  const text = body?.toString('utf8') ?? '';
  return {
    status,
    ok: status >= 200 && status < 300,
    header: (name) => {
      const v = headers[name];
      return Array.isArray(v) ? v.join(', ') : v;
    },
    text,
    json: body ? jsonOf(text) : undefined,
    tooLarge: !body,
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
