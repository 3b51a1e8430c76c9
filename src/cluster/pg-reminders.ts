import { FIRED_RETENTION_MS, type NewReminder, type Reminder, type ReminderRow, type Reminders, reminderOfRow } from '../store/reminders.js';
import type { PgWriter } from './pg-writer.js';

/**
 * Reminders in PostgreSQL, so one set through any instance is listed, cancelled and fired
 * anywhere. Every instance's scheduler asks for due reminders; `claimDue` hands each to one
 * of them (a row lock skipped by the others, then `claimed_until`), and the firing's inbox
 * key (reminder id + fire time) makes a second store of it, after a claim lapsed, a duplicate.
 * Each write is one statement committed before its promise resolves: a user told "set" finds
 * it on any instance.
 */
export class PgReminderStore implements Reminders {
  constructor(private readonly w: PgWriter) {}

  async add(r: NewReminder, maxPending: number): Promise<number | undefined> {
    // Adds racing on several instances may each pass the bound (as with memories): it keeps
    // a conversation's reminders from growing without end, not to an exact count.
    // An origin already stored is answered with its row's id, with no insert tried (so no
    // id is used up) and no count; the unique index settles two adds of one origin at once.
    const origin = r.origin ?? null;
    const [row] = await this.w.read<{ id: number }>(
      `WITH known AS (SELECT id FROM reminders WHERE origin = $11),
       added AS (
         INSERT INTO reminders (scope, channel_id, chat, thread_id, sender, kind, fire_at, text, created_at, origin)
         SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $11
         WHERE NOT EXISTS (SELECT 1 FROM known) AND (SELECT count(*) FROM reminders WHERE scope = $1 AND state = 'pending') < $10
         ON CONFLICT (origin) DO NOTHING
         RETURNING id)
       SELECT id::int AS id FROM added UNION ALL SELECT id::int AS id FROM known`,
      [r.scope, r.channelId, JSON.stringify(r.chat), r.threadId ?? null, JSON.stringify(r.sender), r.kind, r.fireAt, r.text, Date.now(), maxPending, origin],
    );
    if (row || origin === null) return row?.id;
    // Nothing added and nothing known: full, or another instance's add of this origin committed
    // after this statement's snapshot (its insert met the conflict). A new statement sees it.
    const [late] = await this.w.read<{ id: number }>(`SELECT id::int AS id FROM reminders WHERE origin = $1`, [origin]);
    return late?.id;
  }

  async pending(scope: string): Promise<Reminder[]> {
    return (await this.w.read<ReminderRow>(`SELECT * FROM reminders WHERE scope = $1 AND state = 'pending' ORDER BY fire_at, id`, [scope])).map(reminderOfRow);
  }

  async cancel(scope: string, id: number): Promise<boolean> {
    return (await this.w.read(`DELETE FROM reminders WHERE id = $1 AND scope = $2 AND state = 'pending' RETURNING id`, [id, scope])).length > 0;
  }

  async claimDue(now: number, limit: number, claimMs: number): Promise<Reminder[]> {
    const rows = await this.w.read<ReminderRow>(
      `UPDATE reminders SET claimed_until = $3 WHERE id IN (
         SELECT id FROM reminders WHERE state = 'pending' AND fire_at <= $1 AND claimed_until <= $1
         ORDER BY fire_at, id LIMIT $2 FOR UPDATE SKIP LOCKED)
       RETURNING *`,
      [now, limit, now + claimMs],
    );
    return rows.map(reminderOfRow).sort((a, b) => a.fireAt - b.fireAt || a.id - b.id);
  }

  /** Put off as a claim that lapses at `untilMs`: no instance takes it before (src/daemon/reminders.ts). */
  async defer(id: number, untilMs: number): Promise<void> {
    await this.w.read(`UPDATE reminders SET claimed_until = $2 WHERE id = $1 AND state = 'pending'`, [id, untilMs]);
  }

  /** A claimed (or put off) reminder counts from when its claim lapses: others have nothing to do before. */
  async nextFireAt(): Promise<number | undefined> {
    const [row] = await this.w.read<{ at: string | null }>(`SELECT min(greatest(fire_at, claimed_until)) AS at FROM reminders WHERE state = 'pending'`, []);
    return row?.at == null ? undefined : Number(row.at);
  }

  async pendingCount(): Promise<number> {
    const [row] = await this.w.read<{ n: number }>(`SELECT count(*)::int AS n FROM reminders WHERE state = 'pending'`, []);
    return row?.n ?? 0;
  }

  async markFired(id: number): Promise<void> {
    await this.w.read(`UPDATE reminders SET state = 'fired' WHERE id = $1`, [id]);
    await this.w.read(`DELETE FROM reminders WHERE state = 'fired' AND fire_at < $1`, [Date.now() - FIRED_RETENTION_MS]);
  }
}
