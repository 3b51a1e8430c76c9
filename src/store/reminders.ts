import Database from 'better-sqlite3';
import type { ChannelMessage } from '../contracts/message.js';

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

interface Row {
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

const toReminder = (r: Row): Reminder => ({
  id: r.id,
  scope: r.scope,
  channelId: r.channel_id,
  chat: JSON.parse(r.chat) as Reminder['chat'],
  ...(r.thread_id ? { threadId: r.thread_id } : {}),
  sender: JSON.parse(r.sender) as Reminder['sender'],
  kind: r.kind,
  fireAt: r.fire_at,
  text: r.text,
});

/** A busy state database makes a reminder write wait this long at most (they are rare). */
const REMINDER_BUSY_TIMEOUT_MS = 250;
/** Fired reminders are kept this long (for an operator looking into the database), then deleted. */
const FIRED_RETENTION_MS = 7 * 86_400_000;

/**
 * The reminders table, in the state database beside the inbox (its own connection and its
 * own `CREATE TABLE IF NOT EXISTS`, so the inbox's schema version is not involved). A
 * reminder is `pending` until its firing is stored in the inbox, then `fired`; `/reminders
 * cancel` deletes it.
 */
export class ReminderStore {
  readonly #db: Database.Database;

  constructor(file: string) {
    this.#db = new Database(file, { timeout: REMINDER_BUSY_TIMEOUT_MS });
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
      created_at INTEGER NOT NULL
    );
    CREATE INDEX IF NOT EXISTS reminders_due ON reminders (state, fire_at);
    CREATE INDEX IF NOT EXISTS reminders_scope ON reminders (scope, state);`);
  }

  add(r: Omit<Reminder, 'id'>): number {
    const row = this.#db
      .prepare(
        `INSERT INTO reminders (scope, channel_id, chat, thread_id, sender, kind, fire_at, text, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
      )
      .get(r.scope, r.channelId, JSON.stringify(r.chat), r.threadId ?? null, JSON.stringify(r.sender), r.kind, r.fireAt, r.text, Date.now()) as { id: number };
    return row.id;
  }

  /** The conversation's pending reminders, soonest first. */
  pending(scope: string): Reminder[] {
    return (this.#db.prepare(`SELECT * FROM reminders WHERE scope = ? AND state = 'pending' ORDER BY fire_at, id`).all(scope) as Row[]).map(toReminder);
  }

  /** Deletes a pending reminder of this conversation; false when it has none by that id. */
  cancel(scope: string, id: number): boolean {
    return this.#db.prepare(`DELETE FROM reminders WHERE id = ? AND scope = ? AND state = 'pending'`).run(id, scope).changes > 0;
  }

  /** Pending reminders due by `now`, oldest first, at most `limit`. */
  due(now: number, limit: number): Reminder[] {
    return (this.#db.prepare(`SELECT * FROM reminders WHERE state = 'pending' AND fire_at <= ? ORDER BY fire_at, id LIMIT ?`).all(now, limit) as Row[]).map(
      toReminder,
    );
  }

  /** When the next pending reminder is due, if any. */
  nextFireAt(): number | undefined {
    const row = this.#db.prepare(`SELECT MIN(fire_at) AS at FROM reminders WHERE state = 'pending'`).get() as { at: number | null };
    return row.at ?? undefined;
  }

  /** How many reminders are pending (all conversations). */
  pendingCount(): number {
    return (this.#db.prepare(`SELECT COUNT(*) AS n FROM reminders WHERE state = 'pending'`).get() as { n: number }).n;
  }

  markFired(id: number): void {
    this.#db.prepare(`UPDATE reminders SET state = 'fired' WHERE id = ?`).run(id);
    this.#db.prepare(`DELETE FROM reminders WHERE state = 'fired' AND fire_at < ?`).run(Date.now() - FIRED_RETENTION_MS);
  }

  close(): void {
    this.#db.close();
  }
}
