import type { Db } from './db.js';
import type { SettledWindows, WindowStanding } from './reservations.js';

interface Queue {
  add(write: () => void): void;
  flush(): void;
}

/** No window is longer than a UTC day: rows of windows that started two days ago are over. */
const KEEP_MS = 2 * 86_400_000;

/**
 * What one node's spend windows settled (daily budgets, per-sender and per-channel quotas),
 * in its SQLite database: a sender's `user_turns_per_hour` count is in no ledger (usage
 * rows keep no sender), so without this a restart would give every sender a fresh hour.
 * The holds stay in memory (LocalReservations). Writes ride the group commit; a key's
 * ended windows go when its next window is written, the rest at start-up.
 */
export class SqliteSettledWindows implements SettledWindows {
  readonly #read;
  readonly #upsert;
  readonly #dropEnded;
  readonly #top;

  constructor(
    db: Db,
    private readonly group: Queue,
    nowMs = Date.now(),
  ) {
    db.exec(`CREATE TABLE IF NOT EXISTS spend_windows (
      key TEXT NOT NULL,
      window_start INTEGER NOT NULL,
      settled REAL NOT NULL,
      PRIMARY KEY (key, window_start)
    );`);
    db.prepare('DELETE FROM spend_windows WHERE window_start < ?').run(nowMs - KEEP_MS);
    this.#read = db.prepare<[string, number], { settled: number }>('SELECT settled FROM spend_windows WHERE key = ? AND window_start = ?');
    this.#upsert = db.prepare(
      'INSERT INTO spend_windows (key, window_start, settled) VALUES (?, ?, ?) ON CONFLICT (key, window_start) DO UPDATE SET settled = excluded.settled',
    );
    this.#dropEnded = db.prepare('DELETE FROM spend_windows WHERE key = ? AND window_start < ?');
    // substr, not LIKE: "_" and "%" in a channel id are no wildcards there.
    this.#top = db.prepare<[number, string, string, number], WindowStanding>(
      'SELECT key, settled, 0 AS held FROM spend_windows WHERE window_start = ? AND substr(key, 1, length(?)) = ? ORDER BY settled DESC LIMIT ?',
    );
  }

  read(key: string, windowStartMs: number): number | undefined {
    // Read once per window, when the process first sees it: what is queued must be in.
    this.group.flush();
    return this.#read.get(key, windowStartMs)?.settled;
  }

  write(key: string, windowStartMs: number, settled: number): void {
    this.group.add(() => {
      this.#upsert.run(key, windowStartMs, settled);
      // A primary-key range: cheap enough for every write, and no per-key memory here.
      this.#dropEnded.run(key, windowStartMs);
    });
  }

  top(prefix: string, windowStartMs: number, limit: number): WindowStanding[] {
    this.group.flush();
    return this.#top.all(windowStartMs, prefix, prefix, limit);
  }
}
