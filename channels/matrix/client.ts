import { ChannelError } from '../../src/contracts/errors.js';
import { httpJson } from '../../src/util/http-json.js';

/** A Matrix error answer (`{"errcode": "M_...", "error": "..."}`) as thrown by MatrixClient. */
export class MatrixHttpError extends Error {
  constructor(
    readonly status: number,
    readonly errcode: string | undefined,
    readonly retryAfterMs: number | undefined,
    message: string,
    /** The answer was larger than MAX_ANSWER_BYTES and was not read. */
    readonly tooLarge = false,
  ) {
    super(message);
    this.name = 'MatrixHttpError';
  }
}

/**
 * Largest answer body read from the homeserver. A /sync batch with a timeline limit fits in the
 * usual case; one that does not is asked for again smaller (adapter.ts, sync-filter.ts).
 */
export const MAX_ANSWER_BYTES = 8 * 1024 * 1024;

/**
 * The client-server API by plain HTTP (src/util/http-json.ts): the few endpoints a bot needs. Every call
 * sends the access token as a bearer header, never in the query string (it would reach logs).
 */
export class MatrixClient {
  constructor(
    readonly baseUrl: string,
    readonly token: string,
  ) {}

  url(path: string, query?: Record<string, string | undefined>): string {
    const u = new URL(`${this.baseUrl}${path}`);
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) u.searchParams.set(k, v);
    return u.toString();
  }

  /** One request; a non-2xx answer rejects with MatrixHttpError (its errcode and retry-after). */
  async request<T>(method: string, path: string, o: { body?: unknown; query?: Record<string, string | undefined>; signal: AbortSignal }): Promise<T> {
    const res = await httpJson(this.url(path, o.query), {
      method,
      headers: { authorization: `Bearer ${this.token}`, ...(o.body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(o.body !== undefined ? { body: JSON.stringify(o.body) } : {}),
      signal: o.signal,
      maxAnswerBytes: MAX_ANSWER_BYTES,
    });
    if (res.tooLarge) throw new MatrixHttpError(res.status, undefined, undefined, `${method} ${path}: answer larger than ${MAX_ANSWER_BYTES} bytes`, true);
    const text = res.text;
    if (res.json === undefined && res.ok) throw new MatrixHttpError(res.status, undefined, undefined, `${method} ${path}: the answer is not JSON`);
    const json = (typeof res.json === 'object' && res.json !== null ? res.json : {}) as Record<string, unknown>;
    if (res.ok) return json as T;
    const errcode = typeof json.errcode === 'string' ? json.errcode : undefined;
    // Matrix gives retry_after_ms in the body (older servers) and Retry-After in seconds (v1.10+).
    const header = Number(res.header('retry-after') ?? NaN);
    const retryAfterMs =
      typeof json.retry_after_ms === 'number' ? json.retry_after_ms : Number.isFinite(header) ? header * 1000 : res.status === 429 ? 1000 : undefined;
    const why = typeof json.error === 'string' ? json.error.slice(0, 300) : text.slice(0, 200);
    throw new MatrixHttpError(res.status, errcode, retryAfterMs, `${method} ${path}: ${res.status} ${errcode ?? ''} ${why}`.trim());
  }
}

/** Whether the server does not know an endpoint (an older homeserver): then the older one is used. */
export function isUnrecognized(err: unknown): boolean {
  return err instanceof MatrixHttpError && (err.errcode === 'M_UNRECOGNIZED' || (err.status === 404 && err.errcode !== 'M_NOT_FOUND'));
}

/** Whether a request failed (classified or not) because its answer was larger than MAX_ANSWER_BYTES. */
export function isAnswerTooLarge(err: unknown): boolean {
  const cause = err instanceof ChannelError ? err.cause : err;
  return cause instanceof MatrixHttpError && cause.tooLarge;
}

/** The one place Matrix failures are sorted into the catalogue. */
export function classifyMatrixError(err: unknown, what = 'request'): ChannelError {
  if (err instanceof ChannelError) return err;
  if (err instanceof MatrixHttpError) {
    const detail = `Matrix ${what}: ${err.message}`;
    if (err.status === 401 || err.errcode === 'M_UNKNOWN_TOKEN' || err.errcode === 'M_MISSING_TOKEN')
      return new ChannelError('CHANNEL_AUTH_FAILED', `${detail}: the access token was refused; check access_token_env/access_token_file`, { cause: err });
    if (err.status === 429 || err.errcode === 'M_LIMIT_EXCEEDED')
      return new ChannelError('CHANNEL_RATE_LIMITED', detail, { cause: err, retryAfterMs: err.retryAfterMs ?? 1000 });
    if (err.status === 403) return new ChannelError('CHANNEL_FORBIDDEN', `${detail}: the bot is not in the room or lacks a power level`, { cause: err });
    if (err.status >= 500) return new ChannelError('CHANNEL_UNAVAILABLE', detail, { cause: err });
    return new ChannelError('CHANNEL_REQUEST_FAILED', detail, { cause: err });
  }
  return new ChannelError('CHANNEL_NETWORK', `Matrix ${what}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
}
