import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';

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

export type Db = Database.Database;

/** Opens (creating if needed) the state database in WAL mode and migrates it. */
export function openDb(file: string): Db {
  if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true });
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  // NORMAL in WAL keeps every commit durable across a process crash (kill -9), which is
  // the failure the inbox guards against; only an OS crash can lose the last commits.
  db.pragma('synchronous = NORMAL');
  db.pragma('busy_timeout = 5000');
  const version = db.pragma('user_version', { simple: true }) as number;
  const apply = db.transaction(() => {
    for (let v = version; v < migrations.length; v++) db.exec(migrations[v]!);
    db.pragma(`user_version = ${migrations.length}`);
  });
  if (version < migrations.length) apply();
  return db;
}
