import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { migrate, pgMigrations } from '../../src/cluster/migrations.js';
import { PgReminderStore } from '../../src/cluster/pg-reminders.js';
import { PgWriter } from '../../src/cluster/pg-writer.js';
import { openDb } from '../../src/store/db.js';
import { type Reminder, ReminderStore, type Reminders } from '../../src/store/reminders.js';
import { clusterSkipReason, PG_URL, quietLogger, uniqueNamespace } from '../helpers/cluster.js';
import { migratedPools } from '../helpers/pg-schemas.js';

const reminder = (scope: string, text: string, origin?: string): Omit<Reminder, 'id'> & { origin?: string } => ({
  scope,
  channelId: 'tg',
  chat: { id: '42', type: 'dm' },
  sender: { id: '42', name: 'Ada', isBot: false },
  kind: 'telegram',
  fireAt: Date.now() + 600_000,
  text,
  ...(origin ? { origin } : {}),
});

/** The same tests for both backends: what `/remind` and `schedule_message` rely on when their turn is re-run. */
function contract(name: string, open: () => Promise<Reminders>) {
  describe(`reminder store contract: ${name}`, () => {
    it('adding again with the same origin (a re-run of the turn) returns the first id and stores no second row', async () => {
      const s = await open();
      const first = await s.add(reminder('tg:42', 'stand up', 'remind:tg:m1'), 20);
      expect(first).toBeTypeOf('number');
      expect(await s.add(reminder('tg:42', 'stand up', 'remind:tg:m1'), 20)).toBe(first);
      expect((await s.pending('tg:42')).map((r) => r.id)).toEqual([first]);
      // Another origin is another reminder, even with the same words.
      const second = await s.add(reminder('tg:42', 'stand up', 'remind:tg:m2'), 20);
      expect(second).not.toBe(first);
      expect((await s.pending('tg:42')).map((r) => r.text)).toEqual(['stand up', 'stand up']);
      // Without an origin (older callers) nothing is merged: NULLs never conflict.
      await s.add(reminder('tg:42', 'no origin'), 20);
      await s.add(reminder('tg:42', 'no origin'), 20);
      expect(await s.pendingCount()).toBe(4);
    });

    it('the same origin again is not counted against the per-conversation bound a second time', async () => {
      const s = await open();
      const a = await s.add(reminder('tg:7', 'a', 'o-a'), 2);
      const b = await s.add(reminder('tg:7', 'b', 'o-b'), 2);
      expect(await s.add(reminder('tg:7', 'c', 'o-c'), 2)).toBeUndefined();
      // The conversation is full, yet a re-run's add finds its reminder rather than "full".
      expect(await s.add(reminder('tg:7', 'a', 'o-a'), 2)).toBe(a);
      expect(await s.add(reminder('tg:7', 'b', 'o-b'), 2)).toBe(b);
      expect((await s.pending('tg:7')).map((r) => r.text)).toEqual(['a', 'b']);
      // A fired reminder's origin still answers with its id (a late re-run sets nothing new).
      await s.markFired(a!);
      expect(await s.add(reminder('tg:7', 'a', 'o-a'), 2)).toBe(a);
      expect((await s.pending('tg:7')).map((r) => r.text)).toEqual(['b']);
    });

    it('a reminder put off (its firing could not be stored) is not handed out before its time, and counts from it', async () => {
      const s = await open();
      const now = Date.now();
      const due = now - 60_000;
      const a = (await s.add({ ...reminder('tg:9', 'a'), fireAt: due }, 20))!;
      const b = (await s.add({ ...reminder('tg:9', 'b'), fireAt: due + 1 }, 20))!;
      await s.defer(a, now + 30_000);
      // The one after it is handed out; it is not, though due and older.
      expect((await s.claimDue(now, 10, 60_000)).map((r) => r.id)).toEqual([b]);
      await s.markFired(b);
      expect(await s.nextFireAt()).toBe(now + 30_000);
      expect(await s.claimDue(now + 29_999, 10, 60_000)).toEqual([]);
      expect((await s.claimDue(now + 30_000, 10, 60_000)).map((r) => r.id)).toEqual([a]);
      // Put off to "now" while claimed: the claim is handed back, any caller may take it at once.
      await s.defer(a, now + 30_000);
      expect((await s.claimDue(now + 30_000, 10, 60_000)).map((r) => r.id)).toEqual([a]);
      expect(await s.pendingCount()).toBe(1);
    });
  });
}

contract('SQLite', async () => new ReminderStore(openDb(':memory:')));

/** The reminders table as builds before origins made it (no `origin` column, no index on it). */
const OLD_SQLITE_TABLE = `CREATE TABLE reminders (
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
CREATE INDEX reminders_due ON reminders (state, fire_at);
CREATE INDEX reminders_scope ON reminders (scope, state);`;

describe('reminder store: a SQLite database made before origins', () => {
  const dir = mkdtempSync(join(tmpdir(), 'channeld-reminders-old-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('gets the column and its unique index, keeps its rows, and adds idempotently after', async () => {
    const file = join(dir, 'state.db');
    const old = new Database(file);
    old.exec(OLD_SQLITE_TABLE);
    old
      .prepare(`INSERT INTO reminders (scope, channel_id, chat, sender, kind, fire_at, text, created_at) VALUES (?, 'tg', ?, ?, 'telegram', ?, ?, 0)`)
      .run('tg:42', JSON.stringify({ id: '42', type: 'dm' }), JSON.stringify({ id: '42', name: 'Ada', isBot: false }), Date.now() + 60_000, 'from before');
    old.close();

    const db = openDb(file);
    try {
      const s = new ReminderStore(db);
      expect((db.prepare('PRAGMA table_info(reminders)').all() as Array<{ name: string }>).map((c) => c.name)).toContain('origin');
      expect((await s.pending('tg:42')).map((r) => [r.id, r.text])).toEqual([[1, 'from before']]);
      const id = await s.add(reminder('tg:42', 'new', 'o-1'), 20);
      expect(await s.add(reminder('tg:42', 'new', 'o-1'), 20)).toBe(id);
      expect((await s.pending('tg:42')).map((r) => r.text)).toEqual(['from before', 'new']);
      // Opening again (the next start) finds the column and changes nothing.
      const again = new ReminderStore(db);
      expect(await again.add(reminder('tg:42', 'new', 'o-1'), 20)).toBe(id);
      expect(await again.pendingCount()).toBe(2);
    } finally {
      db.close();
    }
  });
});

const skip = await clusterSkipReason();
const pgPool = migratedPools();
if (skip === undefined) {
  contract('PostgreSQL', async () => new PgReminderStore(new PgWriter(await pgPool(4), quietLogger().log)));

  describe('reminder store: a PostgreSQL schema made before origins', () => {
    it('is migrated by the step that adds origins, keeps its rows, and adds idempotently after', async () => {
      const schema = uniqueNamespace();
      const pool = new pg.Pool({ connectionString: PG_URL, options: `-c search_path=${schema}`, max: 2 });
      try {
        // The schema as the build before: every step before the one adding origins, and its version.
        const before = pgMigrations.findIndex((step) => step.includes('reminders_origin'));
        expect(before).toBeGreaterThan(0);
        await pool.query(`CREATE SCHEMA ${schema}; CREATE TABLE ${schema}.schema_version (version INT NOT NULL)`);
        for (const step of pgMigrations.slice(0, before)) await pool.query(step);
        await pool.query(`INSERT INTO ${schema}.schema_version VALUES ($1)`, [before]);
        await pool.query(
          `INSERT INTO reminders (scope, channel_id, chat, sender, kind, fire_at, text, created_at) VALUES ('tg:42', 'tg', $1, $2, 'telegram', $3, 'from before', 0)`,
          [JSON.stringify({ id: '42', type: 'dm' }), JSON.stringify({ id: '42', name: 'Ada', isBot: false }), Date.now() + 60_000],
        );
        await migrate(pool, schema);
        const s = new PgReminderStore(new PgWriter(pool, quietLogger().log));
        expect((await s.pending('tg:42')).map((r) => r.text)).toEqual(['from before']);
        const id = await s.add(reminder('tg:42', 'new', 'o-1'), 20);
        expect(await s.add(reminder('tg:42', 'new', 'o-1'), 20)).toBe(id);
        expect((await s.pending('tg:42')).map((r) => r.text)).toEqual(['from before', 'new']);
      } finally {
        await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => {});
        await pool.end();
      }
    });

    it('two instances adding the same origin at once store one reminder and both answer its id', async () => {
      const pool = await pgPool(8);
      const s = new PgReminderStore(new PgWriter(pool, quietLogger().log));
      for (let round = 0; round < 10; round++) {
        const ids = await Promise.all(Array.from({ length: 4 }, () => s.add(reminder(`tg:race${round}`, 'x', `race-${round}`), 20)));
        expect(ids[0]).toBeTypeOf('number');
        expect(new Set(ids).size).toBe(1);
        expect(await s.pending(`tg:race${round}`)).toHaveLength(1);
      }
    });
  });
} else {
  describe.skip(`reminder store contract: PostgreSQL (skipped: ${skip})`, () => {
    it('needs PostgreSQL', () => {});
  });
}
