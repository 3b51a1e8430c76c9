import { DAY_MS, HOUR_MS } from './windows.js';

/** The quota keys of `[limits]`, an agent and a channel table. */
export interface QuotaKeys {
  user_turns_per_hour?: number | undefined;
  user_cost_per_day?: number | undefined;
  channel_cost_per_day?: number | undefined;
}

export type QuotaName = keyof QuotaKeys;
export const quotaNames: readonly QuotaName[] = ['user_turns_per_hour', 'user_cost_per_day', 'channel_cost_per_day'];

/** One limit that applies to a turn: what it counts, over which window, and where its counter lives. */
export interface QuotaRule {
  name: QuotaName;
  limit: number;
  periodMs: number;
  /** Turns count 1 each; cost counts the turn's estimate, then what it did cost. */
  counts: 'turns' | 'cost';
  /** The reservation key: per channel and sender, or per channel. */
  key: string;
}

/** The most specific setting of each key wins: the channel's, then the agent's, then `[limits]`. */
export function resolveQuotas(limits: QuotaKeys, agent: QuotaKeys | undefined, channel: QuotaKeys | undefined): QuotaKeys {
  const out: QuotaKeys = {};
  for (const k of quotaNames) {
    const v = channel?.[k] ?? agent?.[k] ?? limits[k];
    if (v !== undefined) out[k] = v;
  }
  return out;
}

/**
 * The rules that apply to one sender in one channel, in the order they are reserved. The
 * sender id is the platform's, unique within the channel, so user keys are per channel.
 */
export function quotaRules(q: QuotaKeys, channelId: string, senderId: string): QuotaRule[] {
  const rules: QuotaRule[] = [];
  const user = `${channelId}:${senderId}`;
  if (q.user_turns_per_hour !== undefined)
    rules.push({ name: 'user_turns_per_hour', limit: q.user_turns_per_hour, periodMs: HOUR_MS, counts: 'turns', key: `quota:user_turns:${user}` });
  if (q.user_cost_per_day !== undefined)
    rules.push({ name: 'user_cost_per_day', limit: q.user_cost_per_day, periodMs: DAY_MS, counts: 'cost', key: `quota:user_cost:${user}` });
  if (q.channel_cost_per_day !== undefined)
    rules.push({ name: 'channel_cost_per_day', limit: q.channel_cost_per_day, periodMs: DAY_MS, counts: 'cost', key: `quota:channel_cost:${channelId}` });
  return rules;
}
