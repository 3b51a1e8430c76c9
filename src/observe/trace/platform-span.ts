import { errorType, type SpanHandle } from './ambient.js';

/**
 * The HTTP status a platform answered, where the SDK's error (or one it wraps) carries it:
 * `status`, `statusCode`, a Bot API's `error_code`, a `response.status`.
 */
export function statusOf(err: unknown): number | undefined {
  let e: unknown = err;
  for (let depth = 0; depth < 4 && e && typeof e === 'object'; depth++) {
    const o = e as { status?: unknown; statusCode?: unknown; error_code?: unknown; response?: { status?: unknown }; cause?: unknown };
    for (const v of [o.status, o.statusCode, o.error_code, o.response?.status]) if (typeof v === 'number' && v >= 100 && v < 600) return v;
    e = o.cause;
  }
  return undefined;
}

/** How a platform request's span ends: its status, the retry-after a 429 asked for, the error's code. */
export function platformSpanEnd(span: SpanHandle): (outcome: { error?: unknown }) => void {
  return ({ error }) => {
    if (error !== undefined) {
      const retryAfterMs = (error as { retryAfterMs?: unknown }).retryAfterMs;
      span.set({
        'http.response.status_code': statusOf(error),
        'channeld.platform.retry_after_ms': typeof retryAfterMs === 'number' ? retryAfterMs : undefined,
      });
      span.fail(errorType(error));
    } else span.set({ 'channeld.platform.outcome': 'ok' });
    span.end();
  };
}
