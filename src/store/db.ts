import Database from 'better-sqlite3';
import { chmodSync, closeSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import { CodedError } from '../contracts/errors.js';
import { prepareStateDir, STATE_FILE_MODE } from '../util/state-dir.js';

/**
 * How long one write may block the event loop on a lock another process holds. Short on
 * purpose: a busy write fails fast and is retried off the hot path (GroupCommit,
 * Inbox.addDurable) so /healthz and every other request keep answering.
 */
export const BUSY_TIMEOUT_MS = 10;
/** SQLite's page cache for the state database, in KiB (the `cache_size` pragma's negative form). */
export const PAGE_CACHE_KIB = 2000;
/** Opening and migrating happens once, before anything is served: it may wait longer. */
const OPEN_BUSY_TIMEOUT_MS = 5000;

/** Schema steps, applied in order; `PRAGMA user_version` records how many have run. */
const migrations: readonly string[] = [
  `CREATE TABLE inbox (
     id INTEGER PRIMARY KEY,
     channel_id TEXT NOT NULL,
     message_id TEXT NOT NULL,
     scope TEXT NOT NULL,
     payload TEXT NOT NULL,
     state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending','running','done','failed','refused')),
     reply_refs TEXT NOT NULL DEFAULT '[]',
     error TEXT,
     received_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL,
     UNIQUE (channel_id, message_id)
   );
   CREATE INDEX inbox_state ON inbox (state, id);`,
  `CREATE TABLE sessions (
     id INTEGER PRIMARY KEY,
     agent TEXT NOT NULL,
     scope TEXT NOT NULL,
     created_at INTEGER NOT NULL,
     last_active_at INTEGER NOT NULL
   );
   CREATE INDEX sessions_scope ON sessions (agent, scope, id);
   CREATE TABLE turns (
     id INTEGER PRIMARY KEY,
     session_id INTEGER NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
     user_text TEXT NOT NULL,
     assistant_text TEXT NOT NULL,
     reasoning TEXT NOT NULL DEFAULT '',
     tool_calls TEXT NOT NULL DEFAULT '[]',
     ending TEXT NOT NULL CHECK (ending IN ('done','error','cancelled')),
     model TEXT,
     created_at INTEGER NOT NULL
   );
   CREATE INDEX turns_session ON turns (session_id, id);
   CREATE TABLE conversations (
     agent TEXT NOT NULL,
     scope TEXT NOT NULL,
     model TEXT,
     queue_mode TEXT,
     modes TEXT,
     PRIMARY KEY (agent, scope)
   );`,
];

/**
 * Columns added since, each only where it is missing and without a new schema version (as
 * reminders' `origin` and tool_approvals' `offer`): an older build started on the file again
 * (a rollback) still opens it, and its inserts leave them NULL.
 */
const addedColumns: ReadonlyArray<{ table: string; column: string; type: string }> = [
  // The message each turn answered (src/store/sessions.ts): a re-run of it finds its row.
  { table: 'turns', column: 'origin', type: 'TEXT' },
];

export type Db = Database.Database;

/**
 * Parameters for hot statements that SQLite would otherwise compile again on every run: an
 * equality on a bare `?` in a statement with ORDER BY, MIN/MAX or a join, or a bound
 * `LIMIT ?`. Planning such a statement reads the bound value, which marks the statement to be
 * prepared again when its bindings change (`sqlite3VdbeReprepareOnBind`, formerly
 * `sqlite3VdbeSetVarmask`), and better-sqlite3 clears the bindings after every run: each run
 * then parses and plans the SQL again (the active-session lookup took 5-7 µs instead of about
 * 1 µs, a session's history 7.7 µs instead of 3.2). A CAST is not a bare variable, so the
 * compiled statement is reused; for a column of that type and a value of that type (an
 * integer for a LIMIT) the result is the same. Not for `LIKE ?`: a CAST there would also turn
 * off SQLite's LIKE optimization.
 */
export const TEXT_PARAM = 'CAST(? AS TEXT)';
export const INTEGER_PARAM = 'CAST(? AS INTEGER)';

/** The schema version this build writes (`PRAGMA user_version`). */
export const SCHEMA_VERSION = migrations.length;

/**
 * Opens (creating if needed, 0600 in a 0700 directory) the state database in WAL mode and
 * migrates it. Refuses a database from a newer channeld (STORAGE_TOO_NEW) and one that
 * fails `PRAGMA quick_check` (STORAGE_DAMAGED), each with what to do.
 */
export function openDb(file: string): Db {
  if (file !== ':memory:') {
    prepareStateDir(dirname(file));
    // Created by us first, so SQLite's own files (-wal, -shm take the database's mode) are private too.
    closeSync(openSync(file, 'a', STATE_FILE_MODE));
    chmodSync(file, STATE_FILE_MODE);
  }
  const db = new Database(file, { timeout: OPEN_BUSY_TIMEOUT_MS });
  try {
    const version = damagedIfThrows(file, () => db.pragma('user_version', { simple: true }) as number);
    if (version > SCHEMA_VERSION) {
      throw new CodedError('STORAGE_TOO_NEW', `${file} has schema version ${version}, and this channeld knows versions up to ${SCHEMA_VERSION}`);
    }
    const problems = damagedIfThrows(file, () => (db.pragma('quick_check') as Array<{ quick_check: string }>).map((r) => r.quick_check));
    if (problems.length !== 1 || problems[0] !== 'ok') {
      throw new CodedError('STORAGE_DAMAGED', `${file}: ${problems.slice(0, 3).join('; ')}${problems.length > 3 ? ` (and ${problems.length - 3} more)` : ''}`);
    }
    db.pragma('journal_mode = WAL');
    // NORMAL in WAL keeps every commit durable across a process crash (kill -9), which is
    // the failure the inbox guards against; only an OS crash can lose the last commits.
    db.pragma('synchronous = NORMAL');
    // better-sqlite3 builds SQLite with a 16 MB page cache per connection, which fills as the
    // database grows and shows up as resident memory that never goes back. The hot path reads
    // little (inserts append; lookups touch an index's right edge), so SQLite's own default
    // of 2 MB holds what it needs.
    db.pragma(`cache_size = -${PAGE_CACHE_KIB}`);
    const apply = db.transaction(() => {
      for (let v = version; v < migrations.length; v++) db.exec(migrations[v]!);
      db.pragma(`user_version = ${migrations.length}`);
    });
    if (version < migrations.length) apply();
    for (const { table, column, type } of addedColumns) addColumn(db, table, column, type);
    db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    return db;
  } catch (err) {
    db.close();
    throw err;
  }
}

/**
 * Adds a column where the table lacks it. The look and the add are one write transaction
 * (BEGIN IMMEDIATE), so two processes opening a file at once (`channeld upgrade`) cannot both
 * see it missing: the second waits for the first's add, then finds the column. The look
 * outside it first keeps a start that finds the column from taking the write lock.
 */
export function addColumn(db: Db, table: string, column: string, type: string): void {
  const has = () => (db.prepare(`PRAGMA table_info(${table})`).all() as Array<{ name: string }>).some((c) => c.name === column);
  if (has()) return;
  db.transaction(() => {
    if (!has()) db.exec(`ALTER TABLE ${table} ADD COLUMN ${column} ${type}`);
  }).immediate();
}

/** A file SQLite cannot read as a database is reported as damaged, with what to do. */
function damagedIfThrows<T>(file: string, read: () => T): T {
  try {
    return read();
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === 'SQLITE_CORRUPT' || code === 'SQLITE_NOTADB') throw new CodedError('STORAGE_DAMAGED', `${file}: ${code}`, { cause: err });
    throw err;
  }
}
