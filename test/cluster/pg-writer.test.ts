import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { PgWriter } from '../../src/cluster/pg-writer.js';
import { waitFor } from '../helpers/daemon.js';
import { clusterSkipReason, PG_URL, quietLogger, uniqueNamespace } from '../helpers/cluster.js';

const skip = await clusterSkipReason();

describe.skipIf(skip !== undefined)(`PostgreSQL write-behind${skip ? ` (skipped: ${skip})` : ''}`, () => {
  const schema = uniqueNamespace();
  const pool = new pg.Pool({ connectionString: PG_URL, options: `-c search_path=${schema}`, max: 4 });
  afterAll(async () => {
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await pool.end();
  });

  it('writes queued while a commit runs share the next one; values of every kind arrive as written', async () => {
    await pool.query(
      `CREATE SCHEMA ${schema}; SET search_path TO ${schema}; CREATE TABLE t (id INT PRIMARY KEY, v TEXT, j JSONB, b BOOLEAN, n DOUBLE PRECISION, big BIGINT)`,
    );
    await pool.query(`INSERT INTO ${schema}.t (id) VALUES (0)`);
    const w = new PgWriter(pool, quietLogger().log);
    // Another transaction holds row 0, so the writer's first commit waits on it.
    const locker = await pool.connect();
    await locker.query('BEGIN');
    await locker.query(`SELECT * FROM ${schema}.t WHERE id = 0 FOR UPDATE`);
    w.add('UPDATE t SET v = $1 WHERE id = $2', ['first', 0]);
    const flushes = [w.flush()];
    await waitFor(
      async () => (await pool.query(`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%UPDATE t SET v = %'`)).rowCount,
    );
    // Ten turns finishing one after another (each in its own tick) while that commit waits.
    const values = ["it's", 'back\\slash', 'dollar $2 and $1', 'line\nbreak', 'ünï😀', '', "'; DROP TABLE t; --", 'x', 'y', 'z'];
    for (let i = 1; i <= 10; i++) {
      await new Promise((r) => setImmediate(r));
      w.add('INSERT INTO t (id, v, j, b, n, big) VALUES ($1, $2, $3, $4, $5, $6)', [
        i,
        values[i - 1],
        JSON.stringify({ k: values[i - 1], n: [i] }),
        i % 2 === 0,
        i / 4,
        2 ** 53 - i,
      ]);
      flushes.push(w.flush());
    }
    await locker.query('COMMIT');
    locker.release();
    await Promise.all(flushes);
    // One commit for the first write, one for the ten (a commit per tick made eleven).
    expect(w.counts).toMatchObject({ writes: 11, commits: 2 });
    const { rows } = await pool.query<{ id: number; v: string; j: { k: string; n: number[] }; b: boolean; n: number; big: string }>(
      `SELECT * FROM ${schema}.t ORDER BY id`,
    );
    expect(rows[0]!.v).toBe('first');
    for (let i = 1; i <= 10; i++)
      expect(rows[i]).toEqual({ id: i, v: values[i - 1], j: { k: values[i - 1], n: [i] }, b: i % 2 === 0, n: i / 4, big: String(2 ** 53 - i) });
    // Nothing queued: flush resolves at once; a write added now is committed by the next flush.
    await w.flush();
    w.add('UPDATE t SET v = $1 WHERE id = $2', [null, 1]);
    await w.flush();
    expect((await pool.query(`SELECT v FROM ${schema}.t WHERE id = 1`)).rows[0]).toEqual({ v: null });
  });
});
