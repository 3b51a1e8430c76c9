import { ChannelError } from '../contracts/errors.js';
import { sleep } from '../util/abortable.js';

/**
 * When the next request of one reply may go. Drafts follow `nextAtMs` (the paced interval,
 * widened after a 429); a final edit follows `floorAtMs` (the platform's own floor, or what
 * a 429 asked), so it never waits out a widened draft interval; a final that is a new
 * message follows `holdAtMs` (only what a 429 or a failure's backoff asked).
 */
export interface Pacing {
  /** Earliest time (ms since epoch) the next draft may go. */
  nextAtMs: number;
  /** Earliest time an edit may go: the last request plus the platform floor, a 429's retry time, or a failure's backoff. */
  floorAtMs: number;
  /** Earliest time any request may go: a 429's retry time or a failure's backoff (0 after a success). */
  holdAtMs: number;
  /** The channel's interval (never below the platform floor): where the pace returns to. */
  baseIntervalMs: number;
  /** The platform's own floor between edits of one message (not the channel's wider interval). */
  floorMs: number;
  intervalMs: number;
  consecutiveFailures: number;
  /** When the last 429 came (ms since epoch); long enough without one and the pace is back at the base. */
  rateLimitedAtMs: number;
}

export function newPacing(intervalMs: number, floorMs = intervalMs): Pacing {
  return { nextAtMs: 0, floorAtMs: 0, holdAtMs: 0, baseIntervalMs: intervalMs, floorMs, intervalMs, consecutiveFailures: 0, rateLimitedAtMs: -Infinity };
}

export function isRateLimit(err: unknown): err is ChannelError & { retryAfterMs: number } {
  return err instanceof ChannelError && err.retryAfterMs !== undefined;
}

/**
 * Waits until `atMs` (ms since the epoch); resolves early only when `signal` aborts or the
 * wake handed to `onWake` is called (see `sleep`).
 */
export function sleepUntil(atMs: number, signal?: AbortSignal, onWake?: (wake: () => void) => void): Promise<void> {
  return sleep(atMs - Date.now(), signal, onWake);
}

const FAILURE_BACKOFF_FLOOR_MS = 250;
/** A widened interval never grows past this: a reply keeps moving even under repeated 429s. */
const MAX_INTERVAL_MS = 30_000;
/** A success this long after the last 429 means the platform's limit has passed: back to the base pace at once. */
export const RECOVER_AFTER_MS = 5_000;

/**
 * Records a request's outcome on the pacing state; returns whether it was a 429, or a
 * refused format or tool progress (the reply is planned again at once, the pace unchanged). `sentAtMs`, when
 * the transport could tell, is when a successful request went out: the platform's floor
 * counts from there (the platform counts requests as they reach it, a round trip and the
 * event loop's lag before the answer is read here), the drafts' interval from the answer.
 * Two requests then reach the platform the floor apart give or take how much the network's
 * delay varies between them; the floors are the platforms' documented rates, which tolerate
 * short bursts, and a 429 still widens the pace.
 */
export function pace(p: Pacing, err: unknown, nowMs: number, sentAtMs?: number): 'ok' | 'rate_limited' | 'failed' | 'replan' {
  if (err instanceof ChannelError && (err.code === 'CHANNEL_FORMAT_REFUSED' || err.code === 'CHANNEL_PROGRESS_REFUSED')) return 'replan';
  if (err === undefined) {
    p.consecutiveFailures = 0;
    // Back toward the floor: each success halves the interval a 429 widened (and a success
    // well after the last 429 restores it), so a burst of 429s costs a few slow edits, not
    // the rest of the reply.
    p.intervalMs = nowMs - p.rateLimitedAtMs >= RECOVER_AFTER_MS ? p.baseIntervalMs : Math.max(p.baseIntervalMs, p.intervalMs / 2);
    p.nextAtMs = nowMs + p.intervalMs;
    p.floorAtMs = Math.min(nowMs, sentAtMs ?? nowMs) + p.floorMs;
    p.holdAtMs = 0;
    return 'ok';
  }
  if (isRateLimit(err)) {
    // The platform told us its budget: wait what it said, and go at half the pace until edits succeed again.
    p.intervalMs = Math.min(p.intervalMs * 2, Math.max(MAX_INTERVAL_MS, p.baseIntervalMs));
    p.nextAtMs = nowMs + Math.max(err.retryAfterMs, p.intervalMs);
    p.floorAtMs = nowMs + err.retryAfterMs;
    p.holdAtMs = p.floorAtMs;
    p.rateLimitedAtMs = nowMs;
    return 'rate_limited';
  }
  p.consecutiveFailures++;
  // A floor, so a platform without an edit interval still backs off instead of spinning.
  const backoffMs = (baseMs: number) => Math.min(Math.max(baseMs, FAILURE_BACKOFF_FLOOR_MS) * 2 ** p.consecutiveFailures, 30_000);
  p.nextAtMs = nowMs + backoffMs(p.intervalMs);
  // The final text backs off from the platform's floor: never from the channel's wider
  // interval or one a 429 widened, as when nothing failed.
  p.floorAtMs = nowMs + backoffMs(p.floorMs);
  p.holdAtMs = p.floorAtMs;
  return 'failed';
}
