import type { BackoffConfig } from '../config/schema.js';

/**
 * "Full jitter" backoff: a uniform draw in [0, min(max, initial × factor^(attempt-1))).
 * A jitter that multiplies the delay by [1, 2) (p-retry's `randomize`, say) keeps reconnects of
 * many daemons in step after a platform outage; full jitter spreads them.
 */
export function backoffDelayMs(attempt: number, cfg: BackoffConfig, random: () => number = Math.random): number {
  const ceiling = Math.min(cfg.max_ms, cfg.initial_ms * cfg.factor ** Math.max(0, attempt - 1));
  return Math.floor(random() * ceiling);
}
