/**
 * The windows quotas count in: fixed UTC hours and UTC days. A window starts empty at its
 * start and ends at the next one's start, which is when a refused sender may ask again.
 * Fixed windows (not sliding ones) let every instance of a cluster agree on a window by
 * its start alone, so its counters are one row each.
 */
export const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;

export interface QuotaWindow {
  /** ms since the epoch, inclusive. */
  startMs: number;
  /** When the next window starts: the limit resets then. */
  resetsAtMs: number;
}

/** The window of length `periodMs` (a divisor of a day, counted from 00:00 UTC) that `nowMs` falls in. */
export function windowOf(periodMs: number, nowMs: number): QuotaWindow {
  const startMs = nowMs - (((nowMs % periodMs) + periodMs) % periodMs);
  return { startMs, resetsAtMs: startMs + periodMs };
}

/** "16:00 UTC (in 12 min)": when a window resets, for the refusal and /usage. */
export function formatReset(resetsAtMs: number, nowMs: number): string {
  const at = new Date(resetsAtMs).toISOString().slice(11, 16);
  const minutes = Math.max(1, Math.ceil((resetsAtMs - nowMs) / 60_000));
  const inText = minutes < 60 ? `${minutes} min` : `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
  return `${at} UTC (in ${inText})`;
}
