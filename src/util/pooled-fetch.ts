import { Pool } from 'undici';

/** What a pooled call answers: the part of a fetch `Response` that API clients read (status and body). */
export interface PooledResponse {
  readonly ok: boolean;
  readonly status: number;
  json(): Promise<unknown>;
  text(): Promise<string>;
}

export interface PooledFetchOptions {
  /** Sockets kept open to the origin; a long poll holds one, so a few more than that. */
  connections?: number;
  /** How long an idle socket is kept for the next call. */
  keepAliveTimeoutMs?: number;
}

/**
 * A `fetch` for one origin over undici's keep-alive `Pool.request`, for an SDK's hot calls.
 * Global `fetch` and node-fetch build a WHATWG Request, Headers and a web stream for every
 * call; `Pool.request` does none of that and takes the AbortSignal as it is, which is most of
 * a small JSON call's client CPU. Only a URL on the pool's origin goes this way (anything
 * else goes through global `fetch`). The answer has what JSON API clients read (`ok`,
 * `status`, `json()`, `text()`); an SDK that needs more of `Response` must not be given it.
 * Idle sockets are unreferenced by undici, so the pool never holds the process open.
 */
export function pooledFetch(origin: string, options: PooledFetchOptions = {}): { fetch: typeof fetch; close: () => Promise<void> } {
  const base = new URL(origin).origin;
  const pool = new Pool(base, { connections: options.connections ?? 8, keepAliveTimeout: options.keepAliveTimeoutMs ?? 30_000 });
  const call = async (input: string | URL | Request, init: RequestInit = {}): Promise<PooledResponse> => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : undefined;
    if (url === undefined || !url.startsWith(base) || (url.length > base.length && url[base.length] !== '/'))
      return (await fetch(input, init)) as PooledResponse;
    const res = await pool.request({
      path: url.length > base.length ? url.slice(base.length) : '/',
      method: (init.method ?? 'GET') as 'GET',
      headers: init.headers as Record<string, string> | undefined,
      body: init.body as string | undefined,
      signal: init.signal ?? undefined,
    });
    const status = res.statusCode;
    return { ok: status >= 200 && status < 300, status, json: () => res.body.json(), text: () => res.body.text() };
  };
  return { fetch: call as unknown as typeof fetch, close: () => pool.close() };
}
