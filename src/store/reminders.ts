import type { ChannelMessage } from '../contracts/message.js';
import { addColumn, type Db } from './db.js';

/** One reminder as stored: where it posts, for whom, when and what. */
export interface Reminder {
  id: number;
  scope: string;
  channelId: string;
  chat: ChannelMessage['chat'];
  threadId?: string;
  sender: ChannelMessage['sender'];
  kind: string;
  fireAt: number;
  text: string;
}

/**
 * A reminder to add. `origin` names what set it, unique per reminder and the same when that
 * runs again: `/remind`'s message, or the `schedule_message` call (src/daemon/reminder-commands.ts).
 * Without one (older rows, other callers) the column is NULL, and NULLs never conflict.
 */
export type NewReminder = Omit<Reminder, 'id'> & { origin?: string };

/**
 * Reminders (`/remind`, the `schedule_message` tool): SQLite beside the inbox on one node,
 * PostgreSQL in cluster mode (src/cluster/pg-reminders.ts), so a reminder set through one
 * instance is listed, cancelled and fired by any. A reminder is `pending` until its firing is
 * stored in the inbox, then `fired` (also when it was given up: its channel stayed unknown, see
 * src/daemon/reminders.ts); cancelling deletes it.
 */
export interface Reminders {
  /**
   * Stores a reminder; undefined when its conversation already has `maxPending` pending.
   * Idempotent per `origin`: a turn is re-run from the start after a crash or a takeover, so
   * its tool call or command adds again; an add whose origin is already stored returns that
   * reminder's id (pending or fired) and stores nothing, nor counts against `maxPending`.
   */
  add(r: NewReminder, maxPending: number): Promise<number | undefined>;
  /** The conversation's pending reminders, soonest first. */
  pending(scope: string): Promise<Reminder[]>;
  /** Deletes a pending reminder of this conversation; false when it has none by that id. */
  cancel(scope: string, id: number): Promise<boolean>;
  /**
   * Pending reminders due by `now`, oldest first, at most `limit`, taken for this caller for
   * `claimMs`: another instance asking meanwhile does not get them (it does once the claim
   * lapses, when the taker died before `markFired`).
   */
  claimDue(now: number, limit: number, claimMs: number): Promise<Reminder[]>;
  /**
   * Puts a pending reminder off until `untilMs` (its firing could not be stored): `claimDue`
   * does not hand it out before, and `nextFireAt` counts it from then, so the timer does not
   * spin on it and the reminders after it are not held up. Ends a claim too (`untilMs` now:
   * due again at once, for any instance).
   */
  defer(id: number, untilMs: number): Promise<void>;
  /** When the next pending reminder is due (or, put off, may be tried again), if any. */
  nextFireAt(): Promise<number | undefined>;
  /** How many reminders are pending (all conversations). */
  pendingCount(): Promise<number>;
  markFired(id: number): Promise<void>;
}

/** Fired reminders are kept this long (for an operator looking into the database), then deleted. */
export const FIRED_RETENTION_MS = 7 * 86_400_000;

/** A row as both stores read it (PostgreSQL's BIGINTs come as strings, hence the Number()s). */
export interface ReminderRow {
  id: number;
  scope: string;
  channel_id: string;
  chat: string;
  thread_id: string | null;
  sender: string;
  kind: string;
  fire_at: number;
  text: string;
}

export const reminderOfRow = (r: ReminderRow): Reminder => ({
  id: Number(r.id),
  scope: r.scope,
  channelId: r.channel_id,
  chat: JSON.parse(r.chat) as Reminder['chat'],
  ...(r.thread_id ? { threadId: r.thread_id } : {}),
  sender: JSON.parse(r.sender) as Reminder['sender'],
  kind: r.kind,
  fireAt: Number(r.fire_at),
  text: r.text,
});

/**
 * The reminders table in the state database beside the inbox (its own `CREATE TABLE IF NOT
 * EXISTS`, so the inbox's schema version is not involved). One process owns the database,
 * so `claimDue` needs no claim: the scheduler is the only one asking.
 */
export class ReminderStore implements Reminders {
  readonly #db: Db;

  constructor(db: Db) {
    this.#db = db;
    this.#db.exec(`CREATE TABLE IF NOT EXISTS reminders (
      id INTEGER PRIMARY KEY,
      scope TEXT NOT NULL,
      channel_id TEXT NOT NULL,
      chat TEXT NOT NULL,
      thread_id TEXT,
      sender TEXT NOT NULL,
      kind TEXT NOT NULL,
      fire_at INTEGER NOT NULL,
      text TEXT NOT NULL,
      state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending','fired')),
      created_at INTEGER NOT NULL,
      origin TEXT
    );
    CREATE INDEX IF NOT EXISTS reminders_due ON reminders (state, fire_at);
    CREATE INDEX IF NOT EXISTS reminders_scope ON reminders (scope, state);`);
    // Databases made before adds were idempotent lack the column (as tool_approvals' `offer`).
    addColumn(db, 'reminders', 'origin', 'TEXT');
    // SQLite's unique indexes hold any number of NULLs: rows without an origin never conflict.
    db.exec('CREATE UNIQUE INDEX IF NOT EXISTS reminders_origin ON reminders (origin)');
    // When a firing that could not be stored is tried again (`defer`); 0: whenever due.
    addColumn(db, 'reminders', 'retry_at', 'INTEGER NOT NULL DEFAULT 0');
  }

  async add(r: NewReminder, maxPending: number): Promise<number | undefined> {
    // One process owns the database and these statements run without a turn of the event
    // loop between them: nothing can add the same origin between the lookup and the insert.
    if (r.origin !== undefined) {
      const known = this.#db.prepare('SELECT id FROM reminders WHERE origin = ?').get(r.origin) as { id: number } | undefined;
      if (known) return known.id;
    }
    const row = this.#db
      .prepare(
        `INSERT INTO reminders (scope, channel_id, chat, thread_id, sender, kind, fire_at, text, created_at, origin)
         SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE (SELECT COUNT(*) FROM reminders WHERE scope = ? AND state = 'pending') < ? RETURNING id`,
      )
      .get(
        r.scope,
        r.channelId,
        JSON.stringify(r.chat),
        r.threadId ?? null,
        JSON.stringify(r.sender),
        r.kind,
        r.fireAt,
        r.text,
        Date.now(),
        r.origin ?? null,
        r.scope,
        maxPending,
      ) as { id: number } | undefined;
    return row?.id;
  }

  async pending(scope: string): Promise<Reminder[]> {
    return (this.#db.prepare(`SELECT * FROM reminders WHERE scope = ? AND state = 'pending' ORDER BY fire_at, id`).all(scope) as ReminderRow[]).map(
      reminderOfRow,
    );
  }

  async cancel(scope: string, id: number): Promise<boolean> {
    return this.#db.prepare(`DELETE FROM reminders WHERE id = ? AND scope = ? AND state = 'pending'`).run(id, scope).changes > 0;
  }

  async claimDue(now: number, limit: number): Promise<Reminder[]> {
    return (
      this.#db
        .prepare(`SELECT * FROM reminders WHERE state = 'pending' AND fire_at <= ? AND retry_at <= ? ORDER BY fire_at, id LIMIT ?`)
        .all(now, now, limit) as ReminderRow[]
    ).map(reminderOfRow);
  }

  async defer(id: number, untilMs: number): Promise<void> {
    this.#db.prepare(`UPDATE reminders SET retry_at = ? WHERE id = ? AND state = 'pending'`).run(untilMs, id);
  }

  async nextFireAt(): Promise<number | undefined> {
    const row = this.#db.prepare(`SELECT MIN(MAX(fire_at, retry_at)) AS at FROM reminders WHERE state = 'pending'`).get() as { at: number | null };
    return row.at ?? undefined;
  }

  async pendingCount(): Promise<number> {
    return (this.#db.prepare(`SELECT COUNT(*) AS n FROM reminders WHERE state = 'pending'`).get() as { n: number }).n;
  }

  async markFired(id: number): Promise<void> {
    this.#db.prepare(`UPDATE reminders SET state = 'fired' WHERE id = ?`).run(id);
    this.#db.prepare(`DELETE FROM reminders WHERE state = 'fired' AND fire_at < ?`).run(Date.now() - FIRED_RETENTION_MS);
  }
}
