import { type MinuteRow, type MinuteStore, parseFigures } from '../observe/minute-figures.js';
import type { Db } from './db.js';

interface Queue {
  add(write: () => void): void;
  flush(): void;
}

/**
 * The /admin charts' minutes in the daemon's SQLite database (one node: one writer), one
 * row per minute, so a restart continues the last 24 h. Like the usage ledger it owns its
 * table. Writes ride the group commit: a storage fault holds them with the others.
 */
export class SqliteMinuteStore implements MinuteStore {
  readonly #db: Db;
  readonly #upsert;
  readonly #prune;
  readonly #select;

  constructor(
    db: Db,
    private readonly group: Queue,
  ) {
    this.#db = db;
    db.exec(`CREATE TABLE IF NOT EXISTS chart_minutes (
      minute INTEGER PRIMARY KEY,
      figures TEXT NOT NULL
    );`);
    this.#upsert = db.prepare('INSERT INTO chart_minutes (minute, figures) VALUES (?, ?) ON CONFLICT (minute) DO UPDATE SET figures = excluded.figures');
    this.#prune = db.prepare('DELETE FROM chart_minutes WHERE minute < ?');
    this.#select = db.prepare<[number], { minute: number; figures: string }>('SELECT minute, figures FROM chart_minutes WHERE minute >= ? ORDER BY minute');
  }

  own(sinceMinute: number): Promise<MinuteRow[]> {
    return this.all(sinceMinute);
  }

  all(sinceMinute: number): Promise<MinuteRow[]> {
    this.group.flush();
    if (!this.#db.open) return Promise.resolve([]);
    const rows: MinuteRow[] = [];
    for (const r of this.#select.all(sinceMinute)) {
      const figures = parseFigures(r.figures);
      if (figures) rows.push({ minute: r.minute, figures });
    }
    return Promise.resolve(rows);
  }

  write(rows: readonly MinuteRow[], sinceMinute: number): Promise<void> {
    const json = rows.map((r) => [r.minute, JSON.stringify(r.figures)] as const);
    this.group.add(() => {
      for (const [minute, figures] of json) this.#upsert.run(minute, figures);
      this.#prune.run(sinceMinute);
    });
    return Promise.resolve();
  }
}
