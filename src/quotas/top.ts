import type { SpendReservations } from '../store/reservations.js';
import { quotaRules, type QuotaName } from './limits.js';
import { windowOf } from './windows.js';

/** One counter of a quota's current window: a sender's (per channel) or a channel's. */
export interface QuotaUse {
  limit: QuotaName;
  channel: string;
  sender: string | null;
  used: number;
}

/**
 * The senders and channels that used most of each quota's current window, most first (the
 * operator's view in `GET /actions/usage`). Read from the reservation windows, so only
 * quotas that are configured count; channel ids have no ":", so a key splits unambiguously.
 */
export async function quotaTop(spend: SpendReservations, limit: number, nowMs = Date.now()): Promise<QuotaUse[]> {
  const probe = quotaRules({ user_turns_per_hour: 1, user_cost_per_day: 1, channel_cost_per_day: 1 }, '', '');
  const out: QuotaUse[] = [];
  for (const rule of probe) {
    // The key of channel "" and sender "": its prefix up to the ids.
    const prefix = rule.name === 'channel_cost_per_day' ? rule.key : rule.key.slice(0, -1);
    const rows = await spend.top(prefix, windowOf(rule.periodMs, nowMs).startMs, limit);
    for (const r of rows) {
      const ids = r.key.slice(prefix.length);
      const cut = ids.indexOf(':');
      const used = Math.round((r.settled + r.held) * 1e6) / 1e6;
      out.push(
        cut < 0 ? { limit: rule.name, channel: ids, sender: null, used } : { limit: rule.name, channel: ids.slice(0, cut), sender: ids.slice(cut + 1), used },
      );
    }
  }
  return out;
}
