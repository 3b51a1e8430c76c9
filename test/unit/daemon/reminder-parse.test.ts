import { describe, expect, it } from 'vitest';
import { parseDuration, parseReminder, REMINDER_LIMITS } from '../../../src/daemon/reminder-parse.js';

describe('parseReminder', () => {
  const now = new Date(2026, 11, 1, 10, 30).getTime();

  it('reads durations, clock times (daemon time zone) and dates', () => {
    expect(parseDuration('1h30m')).toBe(5_400_000);
    expect(parseReminder('in 10m stand up', now)).toEqual({ ok: true, fireAt: now + 600_000, text: 'stand up' });
    // 09:00 has passed today: the next one is tomorrow's.
    expect(parseReminder('at 09:00 standup', now)).toEqual({ ok: true, fireAt: new Date(2026, 11, 2, 9, 0).getTime(), text: 'standup' });
    expect(parseReminder('at 11:00 standup', now)).toEqual({ ok: true, fireAt: new Date(2026, 11, 1, 11, 0).getTime(), text: 'standup' });
    expect(parseReminder('2026-12-24T18:00 presents', now)).toEqual({ ok: true, fireAt: new Date(2026, 11, 24, 18, 0).getTime(), text: 'presents' });
  });

  it('refuses what it cannot read, with a readable reason', () => {
    expect(parseReminder('in 10 minutes x', now)).toMatchObject({ ok: false, error: expect.stringContaining('not a duration') });
    expect(parseReminder('at 25:00 x', now)).toMatchObject({ ok: false, error: expect.stringContaining('not a time of day') });
    expect(parseReminder('2020-01-01T00:00 x', now)).toMatchObject({ ok: false, error: expect.stringContaining('in the past') });
    expect(parseReminder('in 10m', now)).toMatchObject({ ok: false, error: expect.stringContaining('Say what') });
    expect(parseReminder('tomorrow x', now)).toMatchObject({ ok: false, error: expect.stringContaining('Usage') });
    expect(parseReminder(`in 1m ${'x'.repeat(REMINDER_LIMITS.maxTextChars + 1)}`, now)).toMatchObject({ ok: false });
    expect(parseReminder('in 400d x', now)).toMatchObject({ ok: false, error: expect.stringContaining('a year ahead') });
  });
});
