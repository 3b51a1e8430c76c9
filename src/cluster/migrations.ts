import type { Pool, QueryConfig, QueryResultRow } from 'pg';
import { checkOut } from './pg-checkout.js';

/**
 * PostgreSQL schema steps of the cluster state, applied in order inside one transaction
 * under an advisory lock (instances starting together migrate once); `schema_version`
 * records how many have run.
 */
export const pgMigrations: readonly string[] = [
  `CREATE TABLE items (
     channel_id TEXT NOT NULL,
     message_id TEXT NOT NULL,
     scope TEXT NOT NULL,
     state TEXT NOT NULL CHECK (state IN ('running','done','failed','refused')),
     reply_refs JSONB NOT NULL DEFAULT '[]',
     error TEXT,
     updated_at BIGINT NOT NULL,
     PRIMARY KEY (channel_id, message_id)
   );
   CREATE INDEX items_updated ON items (updated_at);
   CREATE SEQUENCE session_ids INCREMENT BY 1000;
   CREATE TABLE sessions (
     id BIGINT PRIMARY KEY,
     agent TEXT NOT NULL,
     scope TEXT NOT NULL,
     created_at BIGINT NOT NULL,
     last_active_at BIGINT NOT NULL
   );
   CREATE INDEX sessions_scope ON sessions (agent, scope, id);
   CREATE TABLE turns (
     id BIGSERIAL PRIMARY KEY,
     session_id BIGINT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
     user_text TEXT NOT NULL,
     assistant_text TEXT NOT NULL,
     reasoning TEXT NOT NULL DEFAULT '',
     tool_calls JSONB NOT NULL DEFAULT '[]',
     ending TEXT NOT NULL CHECK (ending IN ('done','error','cancelled')),
     model TEXT,
     created_at BIGINT NOT NULL
   );
   CREATE INDEX turns_session ON turns (session_id, id);
   CREATE TABLE conversations (
     agent TEXT NOT NULL,
     scope TEXT NOT NULL,
     model TEXT,
     queue_mode TEXT,
     modes JSONB,
     PRIMARY KEY (agent, scope)
   );`,
  // Usage and tool-approval decisions: shared, because budgets count the whole cluster's
  // turns and a turn taken over by another instance must find what was decided.
  `CREATE TABLE usage (
     id BIGSERIAL PRIMARY KEY,
     at BIGINT NOT NULL,
     agent TEXT NOT NULL,
     model TEXT NOT NULL,
     channel TEXT NOT NULL,
     scope TEXT NOT NULL,
     input_tokens BIGINT NOT NULL,
     output_tokens BIGINT NOT NULL,
     reasoning_tokens BIGINT NOT NULL,
     cached_tokens BIGINT NOT NULL,
     estimated BOOLEAN NOT NULL,
     cost DOUBLE PRECISION
   );
   CREATE INDEX usage_at ON usage (at);
   CREATE INDEX usage_agent ON usage (agent, at);
   CREATE INDEX usage_scope ON usage (scope, at);
   CREATE TABLE tool_approvals (
     key TEXT PRIMARY KEY,
     id TEXT NOT NULL,
     scope TEXT NOT NULL,
     tool TEXT NOT NULL,
     state TEXT NOT NULL CHECK (state IN ('pending','approved','denied','running','done')),
     decided_by TEXT,
     result TEXT,
     prompt_ref TEXT,
     updated_at BIGINT NOT NULL
   );`,
  // A decision left for a turn that is being taken over (no instance waits on its question).
  `ALTER TABLE tool_approvals ADD COLUMN offer TEXT;
   CREATE INDEX tool_approvals_id ON tool_approvals (id) WHERE state = 'pending';`,
  // Spend reservations (src/cluster/pg-reservations.ts): a window's settled spend, and the open holds.
  `CREATE TABLE spend_windows (
     key TEXT NOT NULL,
     window_start BIGINT NOT NULL,
     settled DOUBLE PRECISION NOT NULL,
     PRIMARY KEY (key, window_start)
   );
   CREATE TABLE spend_holds (
     id BIGSERIAL PRIMARY KEY,
     key TEXT NOT NULL,
     window_start BIGINT NOT NULL,
     amount DOUBLE PRECISION NOT NULL,
     expires_at BIGINT NOT NULL
   );
   CREATE INDEX spend_holds_window ON spend_holds (key, window_start);`,
  // Users' memories (src/cluster/pg-memories.ts), searched by full text.
  `CREATE TABLE memories (
     id BIGSERIAL PRIMARY KEY,
     agent TEXT NOT NULL,
     user_key TEXT NOT NULL,
     text TEXT NOT NULL,
     created_at BIGINT NOT NULL,
     tsv TSVECTOR GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED
   );
   CREATE INDEX memories_user ON memories (agent, user_key, id);
   CREATE INDEX memories_tsv ON memories USING GIN (tsv);`,
  // The /admin charts' minutes (src/cluster/pg-minutes.ts): each instance's own rows.
  `CREATE TABLE chart_minutes (
     instance TEXT NOT NULL,
     minute BIGINT NOT NULL,
     figures JSONB NOT NULL,
     PRIMARY KEY (instance, minute)
   );
   CREATE INDEX chart_minutes_minute ON chart_minutes (minute);`,
  // Reminders (src/cluster/pg-reminders.ts): set through any instance, fired by one (claimed_until).
  `CREATE TABLE reminders (
     id BIGSERIAL PRIMARY KEY,
     scope TEXT NOT NULL,
     channel_id TEXT NOT NULL,
     chat TEXT NOT NULL,
     thread_id TEXT,
     sender TEXT NOT NULL,
     kind TEXT NOT NULL,
     fire_at BIGINT NOT NULL,
     text TEXT NOT NULL,
     state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending','fired')),
     claimed_until BIGINT NOT NULL DEFAULT 0,
     created_at BIGINT NOT NULL
   );
   CREATE INDEX reminders_due ON reminders (state, fire_at);
   CREATE INDEX reminders_scope ON reminders (scope, state);`,
  // Memories' embeddings (`memory_embedding_model`), deleted with their memory.
  `CREATE TABLE memory_vectors (
     memory_id BIGINT PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE,
     vector JSONB NOT NULL
   );`,
  // What set each reminder (a /remind message, a schedule_message call), so the same add
  // made again by a re-run turn finds its row. Rows from before have none: NULLs never conflict.
  `ALTER TABLE reminders ADD COLUMN IF NOT EXISTS origin TEXT;
   CREATE UNIQUE INDEX IF NOT EXISTS reminders_origin ON reminders (origin);`,
  // The write-behind's batches (src/cluster/pg-writer.ts, `ledger`): a retry after a lost
  // COMMIT answer finds its batch here when PostgreSQL had committed it.
  `CREATE TABLE IF NOT EXISTS write_batches (id TEXT PRIMARY KEY, at BIGINT NOT NULL);
   CREATE INDEX IF NOT EXISTS write_batches_at ON write_batches (at);`,
  // The message each turn answered (src/cluster/pg-state.ts), so a re-run of it after a
  // takeover finds its row. Rows from before have none.
  `ALTER TABLE turns ADD COLUMN IF NOT EXISTS origin TEXT;`,
  // Small records a channel keeps for every instance (src/cluster/pg-channel-records.ts), such
  // as the conversations a listener's catch-up reads wherever its lease moves. Bounded here too.
  `CREATE TABLE IF NOT EXISTS channel_records (
     namespace TEXT NOT NULL,
     channel_id TEXT NOT NULL,
     name TEXT NOT NULL CHECK (char_length(name) <= 64),
     value TEXT NOT NULL CHECK (octet_length(value) <= 65536),
     updated_at BIGINT NOT NULL,
     PRIMARY KEY (namespace, channel_id, name)
   );`,
];

/**
 * A schema step may take long (an index on a big table, a lock to wait for), and so may the
 * wait for another instance's migration: far over the pool's query timeout.
 */
const MIGRATION_TIMEOUT_MS = 30 * 60_000;

/** Creates `schema` if needed and brings it to the newest step. */
export async function migrate(pool: Pool, schema: string): Promise<void> {
  const { client, release, abandon } = await checkOut(pool);
  // pg reads a query's own `query_timeout` (client.js), which its types do not list.
  const q = <R extends QueryResultRow>(text: string, values?: unknown[]) =>
    client.query<R>({ text, ...(values ? { values } : {}), query_timeout: MIGRATION_TIMEOUT_MS } as QueryConfig);
  try {
    await q('BEGIN');
    await q(`SELECT pg_advisory_xact_lock(hashtext($1))`, [`channeld:${schema}`]);
    await q(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await q(`CREATE TABLE IF NOT EXISTS ${schema}.schema_version (version INT NOT NULL)`);
    const { rows } = await q<{ version: number }>(`SELECT version FROM ${schema}.schema_version`);
    const version = rows[0]?.version ?? 0;
    for (let v = version; v < pgMigrations.length; v++) await q(`SET LOCAL search_path TO ${schema}; ${pgMigrations[v]}`);
    if (rows.length === 0) await q(`INSERT INTO ${schema}.schema_version VALUES ($1)`, [pgMigrations.length]);
    // Never lowered: an older build started after a newer one (a rollback, a rolling upgrade)
    // would otherwise make the next newer one run its steps again.
    else await q(`UPDATE ${schema}.schema_version SET version = GREATEST(version, $1)`, [pgMigrations.length]);
    await q('COMMIT');
  } catch (err) {
    await abandon(err);
    throw err;
  } finally {
    release();
  }
}
