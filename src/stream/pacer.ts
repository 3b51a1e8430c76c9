import { ChannelError } from '../errors.js';
import { sleep } from '../kernel/sleep.js';

/** The platform said 429, or we never got an answer: how long to wait before the next request. */
export interface Pacing {
  /** Earliest time (ms since epoch) the next request may go. */
  nextAtMs: number;
  intervalMs: number;
  consecutiveFailures: number;
}

export function isRateLimit(err: unknown): err is ChannelError & { retryAfterMs: number } {
  return err instanceof ChannelError && err.retryAfterMs !== undefined;
}

/** Waits until `atMs` (ms since the epoch); resolves early only when `signal` aborts. */
export function sleepUntil(atMs: number, signal?: AbortSignal): Promise<void> {
  return sleep(atMs - Date.now(), signal);
}

const FAILURE_BACKOFF_FLOOR_MS = 250;

/** Records a request's outcome on the pacing state; returns whether it was a 429. */
export function pace(p: Pacing, err: unknown, nowMs: number): 'ok' | 'rate_limited' | 'failed' {
  if (err === undefined) {
    p.consecutiveFailures = 0;
    p.nextAtMs = nowMs + p.intervalMs;
    return 'ok';
  }
  if (isRateLimit(err)) {
    // The platform told us its budget: wait what it said, then go at half the pace for the rest of the turn.
    p.intervalMs *= 2;
    p.nextAtMs = nowMs + Math.max(err.retryAfterMs, p.intervalMs);
    return 'rate_limited';
  }
  p.consecutiveFailures++;
  // A floor, so a platform without an edit interval still backs off instead of spinning.
  p.nextAtMs = nowMs + Math.min(Math.max(p.intervalMs, FAILURE_BACKOFF_FLOOR_MS) * 2 ** p.consecutiveFailures, 30_000);
  return 'failed';
}
