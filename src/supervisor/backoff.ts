import type { BackoffConfig } from '../config/schema.js';

/**
 * "Full jitter" backoff: a uniform draw in [0, min(max, initial × factor^(attempt-1))).
 * p-retry's own `randomize` multiplies by [1, 2), which keeps reconnects of many daemons in
 * step after a platform outage; full jitter spreads them, so this one formula is ours.
 */
export function backoffDelayMs(attempt: number, cfg: BackoffConfig, random: () => number = Math.random): number {
  const ceiling = Math.min(cfg.max_ms, cfg.initial_ms * cfg.factor ** Math.max(0, attempt - 1));
  return Math.floor(random() * ceiling);
}
