/** The bounds of one reminder: what a chat user can ask for. */
export const REMINDER_LIMITS = {
  /** Pending reminders per conversation. */
  perConversation: 20,
  /** Characters of reminder text. */
  maxTextChars: 500,
  /** How far ahead a reminder may be set. */
  maxAheadMs: 366 * 24 * 3_600_000,
} as const;

export type ParsedReminder = { ok: true; fireAt: number; text: string } | { ok: false; error: string };

const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 7 * 86_400_000 };

export const REMIND_USAGE = 'in 10m TEXT | at 09:00 TEXT | 2026-12-24T18:00 TEXT';

/** "10m", "1h30m", "45s", "2d" → ms; undefined when not a duration. */
export function parseDuration(text: string): number | undefined {
  if (!/^(\d+[smhdw])+$/.test(text)) return undefined;
  let ms = 0;
  for (const [, n, unit] of text.matchAll(/(\d+)([smhdw])/g)) ms += Number(n) * UNIT_MS[unit!]!;
  return ms;
}

/**
 * Parses the arguments of `/remind`. Clock times and dates without an offset are read in
 * the daemon's own time zone (the process's `TZ`): `at 09:00` is the next 09:00 there.
 */
export function parseReminder(args: string, now: number): ParsedReminder {
  const m = /^(\S+)(?:\s+(\S+))?(?:\s+([\s\S]*))?$/.exec(args.trim());
  if (!m) return { ok: false, error: `Usage: /remind ${REMIND_USAGE}` };
  const [, first, second, rest] = m;
  const relative = first === 'in' || first === 'at';
  if (relative && !second) return { ok: false, error: `Usage: /remind ${REMIND_USAGE}` };
  const when = parseWhen(relative ? `${first} ${second}` : first!, now);
  if (!when.ok) return when;
  return reminderText(relative ? (rest ?? '') : [second, rest].filter(Boolean).join(' '), when.fireAt, now);
}

/** A reminder's time alone: `in 10m`, `at 09:00` or an ISO date (the `schedule_message` tool's `when`). */
export function parseWhen(when: string, now: number): { ok: true; fireAt: number } | { ok: false; error: string } {
  const [first, second, ...more] = when.trim().split(/\s+/);
  if (first === 'in' || first === 'at') {
    if (!second || more.length) return { ok: false, error: `"${when}" is not a time; write e.g. in 10m, at 09:00 or 2026-12-24T18:00.` };
    if (first === 'in') {
      const ms = parseDuration(second.toLowerCase());
      if (ms === undefined || ms <= 0) return { ok: false, error: `"${second}" is not a duration; write e.g. 30s, 10m, 1h30m or 2d.` };
      return { ok: true, fireAt: now + ms };
    }
    const hm = /^([01]?\d|2[0-3]):([0-5]\d)$/.exec(second);
    if (!hm) return { ok: false, error: `"${second}" is not a time of day; write HH:MM, e.g. 09:00 (the daemon's time zone).` };
    const d = new Date(now);
    d.setHours(Number(hm[1]), Number(hm[2]), 0, 0);
    if (d.getTime() <= now) d.setDate(d.getDate() + 1);
    return { ok: true, fireAt: d.getTime() };
  }
  if (second || !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?(Z|[+-]\d{2}:\d{2})?$/.test(first ?? ''))
    return { ok: false, error: `Usage: /remind ${REMIND_USAGE}` };
  const fireAt = new Date(first!).getTime();
  if (Number.isNaN(fireAt)) return { ok: false, error: `"${first}" is not a valid date.` };
  if (fireAt <= now) return { ok: false, error: `${first} is in the past.` };
  return { ok: true, fireAt };
}

/** The text of a reminder firing at `fireAt`, checked against the bounds. */
export function reminderText(raw: string, fireAt: number, now: number): ParsedReminder {
  const text = raw.trim();
  if (!text) return { ok: false, error: 'Say what to remind you of, e.g. /remind in 10m stand up.' };
  if (text.length > REMINDER_LIMITS.maxTextChars) return { ok: false, error: `A reminder is at most ${REMINDER_LIMITS.maxTextChars} characters.` };
  if (fireAt - now > REMINDER_LIMITS.maxAheadMs) return { ok: false, error: 'A reminder can be set at most a year ahead.' };
  return { ok: true, fireAt, text };
}
