import { Cron } from 'croner';
import { z } from 'zod';

/** The cron patterns `[[schedules]]` accepts: five fields, or six with seconds first (one second a minute at most, see below). */
export const CRON_MODE = '5-or-6-parts';

const timezone = z.string().superRefine((tz, ctx) => {
  try {
    new Intl.DateTimeFormat('en', { timeZone: tz });
  } catch {
    ctx.addIssue({ code: 'custom', message: `unknown time zone "${tz}"; write an IANA name, e.g. "Europe/Berlin" or "UTC"` });
  }
});

/**
 * One `[[schedules]]` table: an agent turn with `prompt` at each `cron` firing, answered in
 * `chat` of `channel`. `catch_up = "last"` runs the latest firing missed while the daemon was
 * down (within the inbox retention), `"none"` skips missed ones.
 */
export const scheduleSchema = z
  .strictObject({
    id: z.string().regex(/^[A-Za-z0-9_-]+$/, 'letters, digits, "_" and "-"'),
    channel: z.string().min(1),
    chat: z.string().min(1),
    cron: z.string().min(1),
    /** An IANA time zone the cron pattern is read in; default the daemon's. */
    timezone: timezone.optional(),
    prompt: z.string().min(1).max(4000),
    /** The agent that answers; default the channel's. */
    agent: z
      .string()
      .regex(/^[A-Za-z0-9_-]+$/)
      .optional(),
    catch_up: z.enum(['last', 'none']).default('none'),
  })
  .superRefine((s, ctx) => {
    try {
      new Cron(s.cron, { paused: true, mode: CRON_MODE, ...(s.timezone ? { timezone: s.timezone } : {}) });
    } catch (err) {
      ctx.addIssue({ code: 'custom', path: ['cron'], message: `not a cron pattern (five fields, or six with seconds first): ${(err as Error).message}` });
      return;
    }
    const seconds = secondsPerMinute(s.cron);
    if (seconds > 1)
      ctx.addIssue({
        code: 'custom',
        path: ['cron'],
        message: `fires ${seconds} times a minute (its seconds field is "${s.cron.trim().split(/\s+/)[0]}"); each firing is an agent turn, so a schedule fires at most once a minute: name one second, e.g. "0 ${s.cron.trim().split(/\s+/).slice(1).join(' ')}"`,
      });
  });

/** A fixed minute far from any daylight-saving change: only the seconds field is read here. */
const A_MINUTE_MS = Date.UTC(2026, 0, 1, 12, 0, 0);

/**
 * How many seconds of a matching minute a pattern fires at: 1 for five fields (second 0) and
 * for six fields whose seconds field names one second. The other fields only choose the
 * minutes, so the seconds field alone, under every minute, tells it.
 */
function secondsPerMinute(pattern: string): number {
  const fields = pattern.trim().split(/\s+/);
  if (fields.length !== 6) return 1;
  const everyMinute = new Cron(`${fields[0]} * * * * *`, { paused: true, mode: CRON_MODE, timezone: 'UTC' });
  return everyMinute.nextRuns(61, new Date(A_MINUTE_MS - 1)).filter((d) => d.getTime() < A_MINUTE_MS + 60_000).length;
}

export type ScheduleConfig = z.output<typeof scheduleSchema>;

/** The schedules list: ids are unique. */
export const schedulesSchema = z.array(scheduleSchema).superRefine((list, ctx) => {
  const seen = new Set<string>();
  for (const [i, s] of list.entries()) {
    if (seen.has(s.id)) ctx.addIssue({ code: 'custom', path: [i, 'id'], message: `schedule id "${s.id}" is used twice` });
    seen.add(s.id);
  }
});

/** When `s` fires next (an ISO time), or null when its pattern matches no later time. */
export function nextFireAt(s: ScheduleConfig, from = new Date()): string | null {
  const cron = new Cron(s.cron, { paused: true, mode: CRON_MODE, ...(s.timezone ? { timezone: s.timezone } : {}) });
  return cron.nextRun(from)?.toISOString() ?? null;
}
