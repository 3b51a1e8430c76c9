import { describe, expect, it } from 'vitest';
import { quotaRules, resolveQuotas } from '../../../src/quotas/limits.js';
import { DAY_MS, formatReset, HOUR_MS, windowOf } from '../../../src/quotas/windows.js';
import { LocalReservations } from '../../../src/store/reservations.js';

const at = (iso: string) => Date.parse(iso);

describe('quota windows', () => {
  it('an hour window runs from the full UTC hour to the next, start inclusive', () => {
    expect(windowOf(HOUR_MS, at('2026-12-01T14:59:59.999Z'))).toEqual({ startMs: at('2026-12-01T14:00:00Z'), resetsAtMs: at('2026-12-01T15:00:00Z') });
    expect(windowOf(HOUR_MS, at('2026-12-01T15:00:00Z'))).toEqual({ startMs: at('2026-12-01T15:00:00Z'), resetsAtMs: at('2026-12-01T16:00:00Z') });
  });

  it('a day window runs from 00:00 UTC, across a month and a year end', () => {
    expect(windowOf(DAY_MS, at('2026-12-31T23:59:59Z'))).toEqual({ startMs: at('2026-12-31T00:00:00Z'), resetsAtMs: at('2027-01-01T00:00:00Z') });
    expect(windowOf(DAY_MS, at('2027-01-01T00:00:00Z')).startMs).toBe(at('2027-01-01T00:00:00Z'));
  });

  it('a time before the epoch still falls in the window that contains it', () => {
    expect(windowOf(HOUR_MS, -1)).toEqual({ startMs: -HOUR_MS, resetsAtMs: 0 });
  });

  it('the reset reads as a UTC time and how long until it, never "in 0 min"', () => {
    const w = windowOf(HOUR_MS, at('2026-12-01T14:48:30Z'));
    expect(formatReset(w.resetsAtMs, at('2026-12-01T14:48:30Z'))).toBe('15:00 UTC (in 12 min)');
    expect(formatReset(w.resetsAtMs, at('2026-12-01T14:59:59.500Z'))).toBe('15:00 UTC (in 1 min)');
    const d = windowOf(DAY_MS, at('2026-12-01T09:30:00Z'));
    expect(formatReset(d.resetsAtMs, at('2026-12-01T09:30:00Z'))).toBe('00:00 UTC (in 14 h 30 min)');
  });
});

describe('quota settings', () => {
  it('the channel wins over the agent, the agent over [limits], key by key', () => {
    expect(
      resolveQuotas({ user_turns_per_hour: 10, channel_cost_per_day: 5 }, { user_turns_per_hour: 4, user_cost_per_day: 1 }, { user_turns_per_hour: 2 }),
    ).toEqual({
      user_turns_per_hour: 2,
      user_cost_per_day: 1,
      channel_cost_per_day: 5,
    });
    expect(resolveQuotas({}, undefined, undefined)).toEqual({});
  });

  it('user counters are per channel and sender, the channel counter per channel; hours for turns, days for cost', () => {
    const rules = quotaRules({ user_turns_per_hour: 2, user_cost_per_day: 1, channel_cost_per_day: 5 }, 'web', 'u1');
    expect(rules.map((r) => [r.name, r.key, r.periodMs, r.counts])).toEqual([
      ['user_turns_per_hour', 'quota:user_turns:web:u1', HOUR_MS, 'turns'],
      ['user_cost_per_day', 'quota:user_cost:web:u1', DAY_MS, 'cost'],
      ['channel_cost_per_day', 'quota:channel_cost:web', DAY_MS, 'cost'],
    ]);
  });
});

describe('the counters of one node', () => {
  it('forget windows that ended once many keys came and went, and keep the current ones', async () => {
    const spend = new LocalReservations();
    const reserve = (key: string, windowStartMs: number) => spend.reserve({ key, windowStartMs, limit: 10, recorded: async () => 0 }, 1);
    for (let i = 0; i < 1100; i++) await reserve(`quota:user_turns:web:u${i}`, 0);
    await reserve('quota:user_turns:web:now', 2 * DAY_MS - HOUR_MS);
    expect(await spend.peek('quota:user_turns:web:u1', 0)).toEqual({ key: 'quota:user_turns:web:u1', settled: 0, held: 1 });
    // Past the sweep size, a reservation a day after those windows began drops them.
    for (let i = 0; i < 1100; i++) await reserve(`quota:user_turns:web:v${i}`, 2 * DAY_MS);
    expect(await spend.peek('quota:user_turns:web:u1', 0)).toBeUndefined();
    expect(await spend.peek('quota:user_turns:web:now', 2 * DAY_MS - HOUR_MS)).toBeDefined();
    expect(await spend.top('quota:user_turns:web:v', 2 * DAY_MS, 3)).toHaveLength(3);
  });
});
