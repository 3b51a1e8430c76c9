import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { checkOut } from '../../src/cluster/pg-checkout.js';
import { PgWriter } from '../../src/cluster/pg-writer.js';
import { waitFor } from '../helpers/daemon.js';
import { clusterSkipReason, PG_URL, quietLogger, uniqueNamespace } from '../helpers/cluster.js';
import { TcpGate } from '../fakes/tcp-gate.js';

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

  /** A pool to the tests' PostgreSQL through a gate that can cut it off, and the gate. */
  async function gated(more: pg.PoolConfig = {}): Promise<{ gate: TcpGate; pool: pg.Pool }> {
    const url = new URL(PG_URL);
    const gate = await new TcpGate().start(url.hostname, Number(url.port || 5432));
    url.host = `127.0.0.1:${gate.port}`;
    const gatedPool = new pg.Pool({ connectionString: url.toString(), options: `-c search_path=${schema}`, max: 2, ...more });
    gatedPool.on('error', () => {});
    return { gate, pool: gatedPool };
  }

  /** Whether a new reply message would wait now: whenHealthy asked and stopped at once. */
  async function waits(w: PgWriter): Promise<boolean> {
    const stop = new AbortController();
    const healthy = w.whenHealthy(stop.signal);
    stop.abort();
    return !(await healthy);
  }

  // A new reply message waits for PostgreSQL (SharedState.whenWritable): posted while its id
  // cannot be committed, a takeover would not know it and would post the answer again.
  it('while commits fail, whenHealthy waits; it resolves once PostgreSQL takes the batch', async () => {
    const { gate, pool: gp } = await gated();
    const { log, sink } = quietLogger();
    const w = new PgWriter(gp, log);
    try {
      expect(await w.whenHealthy(new AbortController().signal)).toBe(true);
      // The cut comes while a commit is in flight (it waits on a row lock another transaction
      // holds): the pool's client is told by an 'error' event, which must not end the process
      // (an uncaught exception before: vitest failed the run with it), and the batch is retried.
      const locker = await pool.connect();
      await locker.query('BEGIN');
      await locker.query(`SELECT * FROM ${schema}.t WHERE id = 0 FOR UPDATE`);
      w.add('UPDATE t SET v = $1 WHERE id = $2', ['cut mid-commit', 0]);
      await waitFor(async () => (await pool.query(`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%cut mid-commit%'`)).rowCount);
      gate.down();
      await locker.query('ROLLBACK');
      locker.release();
      w.add('INSERT INTO t (id, v) VALUES ($1, $2)', [100, 'during the outage']);
      const flushed = w.flush();
      await waitFor(() => waits(w));
      let told = 0;
      let healthy: boolean | undefined;
      void w.whenHealthy(new AbortController().signal, () => told++).then((ok) => (healthy = ok));
      // Still waiting after a second failed commit.
      await waitFor(() => sink.entries().some((l) => l.msg === 'PostgreSQL commit failed; retrying' && l.attempt === 2), 10_000);
      expect([healthy, told]).toEqual([undefined, 1]);
      gate.up();
      await flushed;
      await waitFor(() => healthy === true, 10_000);
      expect(await waits(w)).toBe(false);
      expect((await pool.query(`SELECT id, v FROM ${schema}.t WHERE id IN (0, 100) ORDER BY id`)).rows).toEqual([
        { id: 0, v: 'cut mid-commit' },
        { id: 100, v: 'during the outage' },
      ]);
    } finally {
      await gate.close();
      await gp.end();
    }
  });

  // The batch given up (one attempt here, eight in the daemon) leaves nothing retrying: a
  // probe asks PostgreSQL for a transaction id until it gives one, so waiters do not wait forever.
  it('after a batch is given up, a probe tells the waiters when PostgreSQL is back', async () => {
    const { gate, pool: gp } = await gated();
    const { log, sink } = quietLogger();
    const w = new PgWriter(gp, log, undefined, { maxAttempts: 1 });
    try {
      // A waiter stopped before the outage ended (its reply stopped) is counted out once: it
      // does not hide the waiters of a later outage from the probe.
      gate.down();
      w.add('INSERT INTO t (id, v) VALUES ($1, $2)', [101, 'lost']);
      await w.flush();
      expect(await waits(w)).toBe(true);
      gate.up();
      w.add('INSERT INTO t (id, v) VALUES ($1, $2)', [102, 'back']);
      await w.flush();
      expect(await waits(w)).toBe(false);
      gate.down();
      w.add('INSERT INTO t (id, v) VALUES ($1, $2)', [103, 'lost']);
      await w.flush();
      expect(sink.entries().some((l) => l.msg === 'state writes lost: PostgreSQL kept failing')).toBe(true);
      let healthy: boolean | undefined;
      void w.whenHealthy(new AbortController().signal).then((ok) => (healthy = ok));
      await new Promise((r) => setImmediate(r));
      expect(healthy).toBeUndefined();
      gate.up();
      await waitFor(() => healthy === true, 10_000);
      expect(await waits(w)).toBe(false);
    } finally {
      await gate.close();
      await gp.end();
    }
  });

  // The connection is lost after PostgreSQL ran COMMIT and before its answer arrived: the
  // outcome is unknown to the writer, which tries the batch again. Run twice, its inserts
  // would count twice (the usage ledger, a turn's history), or a keyed one would refuse the
  // whole batch as a duplicate until it is given up, every other write in it lost too.
  it('a batch whose COMMIT answer was lost is not run again: the retry finds it in the ledger', async () => {
    await pool.query(`CREATE TABLE ${schema}.ledger (id TEXT PRIMARY KEY, at BIGINT NOT NULL); CREATE TABLE ${schema}.events (n INT)`);
    const { gate, pool: gp } = await gated();
    const { log, sink } = quietLogger();
    const w = new PgWriter(gp, log, undefined, { ledger: 'ledger' });
    try {
      w.add('INSERT INTO events (n) VALUES ($1)', [0]);
      await w.flush();
      gate.mute();
      w.add('INSERT INTO events (n) VALUES ($1)', [1]);
      const flushed = w.flush();
      // Committed on the server, unanswered on the client: then the connection goes.
      await waitFor(async () => (await pool.query(`SELECT 1 FROM ${schema}.events WHERE n = 1`)).rowCount, 10_000);
      gate.down();
      await waitFor(() => sink.entries().some((l) => l.msg === 'PostgreSQL commit failed; retrying'), 10_000);
      gate.up();
      await flushed;
      expect((await pool.query(`SELECT n FROM ${schema}.events ORDER BY n`)).rows).toEqual([{ n: 0 }, { n: 1 }]);
      expect(sink.entries().some((l) => l.msg === 'state writes lost: PostgreSQL kept failing')).toBe(false);
      expect((await pool.query(`SELECT count(*)::int AS c FROM ${schema}.ledger`)).rows).toEqual([{ c: 2 }]);
    } finally {
      await gate.close();
      await gp.end();
    }
  });

  /** Backends of this schema's tests waiting on a lock with `marker` in their query. */
  const lockWaits = async (marker: string) =>
    (await pool.query(`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1`, [`%${marker}%`])).rowCount ?? 0;

  // The cut comes while the batch waits on a row lock: its backend goes on and commits once
  // the lock is free, after the retry looked in the ledger and found nothing. The retry's
  // ledger row then waits on that backend's and is refused as a duplicate: the batch ran,
  // once, and that is a success, not a failed attempt (on the last one it was logged lost).
  it('a retry refused by its own ledger row counts as committed', async () => {
    const { gate, pool: gp } = await gated();
    const { log, sink } = quietLogger();
    const w = new PgWriter(gp, log, undefined, { ledger: 'ledger', maxAttempts: 2 });
    const locker = await pool.connect();
    try {
      await locker.query('BEGIN');
      await locker.query(`SELECT * FROM ${schema}.t WHERE id = 0 FOR UPDATE`);
      w.add('UPDATE t SET v = $1 WHERE id = $2', ['ran before', 0]);
      w.add('INSERT INTO events (n) VALUES ($1)', [2]);
      const flushed = w.flush();
      await waitFor(async () => (await lockWaits('ran before')) === 1, 10_000);
      gate.down();
      await waitFor(() => sink.entries().some((l) => l.msg === 'PostgreSQL commit failed; retrying'), 10_000);
      gate.up();
      // The retry's batch waits on the first one's ledger row, which waits on the row lock.
      await waitFor(async () => (await lockWaits('ran before')) === 2, 10_000);
      await locker.query('ROLLBACK');
      await flushed;
      expect((await pool.query(`SELECT n FROM ${schema}.events WHERE n = 2`)).rows).toEqual([{ n: 2 }]);
      expect(sink.entries().some((l) => l.msg === 'state writes lost: PostgreSQL kept failing')).toBe(false);
      expect(await waits(w)).toBe(false);
    } finally {
      locker.release();
      await gate.close();
      await gp.end();
    }
  });

  // A network that loses packets without a reset: the answer to the COMMIT never comes. The
  // pool's query timeout ends the wait, the connection (its query still open) is dropped
  // rather than given back, and the retry finds the batch committed.
  it('a commit whose answer never comes times out; its connection is dropped and the batch is not run twice', async () => {
    const { gate, pool: gp } = await gated({ query_timeout: 1000, connectionTimeoutMillis: 1000 });
    const { log, sink } = quietLogger();
    const w = new PgWriter(gp, log, undefined, { ledger: 'ledger' });
    try {
      // A connection made before the loss, as a running daemon has.
      w.add('INSERT INTO events (n) VALUES ($1)', [-3]);
      await w.flush();
      gate.mute();
      w.add('INSERT INTO events (n) VALUES ($1)', [3]);
      const flushed = w.flush();
      await waitFor(() => sink.entries().some((l) => l.msg === 'PostgreSQL commit failed; retrying'), 10_000);
      gate.up();
      await flushed;
      expect((await pool.query(`SELECT n FROM ${schema}.events WHERE n = 3`)).rows).toEqual([{ n: 3 }]);
      expect(sink.entries().some((l) => l.msg === 'state writes lost: PostgreSQL kept failing')).toBe(false);
    } finally {
      await gate.close();
      await gp.end();
    }
  });

  // A transaction that failed is rolled back and its client given back only where PostgreSQL
  // answered the failure. A timeout is the client's own: the statement may still run (holding
  // its locks, its transaction open), so the client is dropped; given back, the next borrower's
  // statement ran inside that open transaction, or queued behind it.
  it('abandon rolls back a failure PostgreSQL answered, and drops a client whose query timed out', async () => {
    const p = new pg.Pool({ connectionString: PG_URL, options: `-c search_path=${schema}`, max: 1, query_timeout: 500 });
    p.on('error', () => {});
    const locker = await pool.connect();
    try {
      const refused = await checkOut(p);
      await refused.client.query('BEGIN');
      const err = await refused.client.query('SELECT * FROM no_such_table').then(
        () => undefined,
        (e: unknown) => e,
      );
      await refused.abandon(err);
      expect([p.totalCount, p.idleCount]).toEqual([1, 1]);
      // Given back clean: a statement outside any transaction.
      expect((await p.query(`SELECT now() = statement_timestamp() AS alone`)).rows).toEqual([{ alone: true }]);
      await locker.query('BEGIN');
      await locker.query(`SELECT * FROM ${schema}.t WHERE id = 0 FOR UPDATE`);
      const waiting = await checkOut(p);
      await waiting.client.query('BEGIN');
      const timedOut = await waiting.client.query(`SELECT * FROM ${schema}.t WHERE id = 0 FOR UPDATE`).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(String(timedOut)).toMatch(/timeout/);
      await waiting.abandon(timedOut);
      waiting.release();
      expect(p.totalCount).toBe(0);
    } finally {
      await locker.query('ROLLBACK');
      locker.release();
      await p.end();
    }
  });
});
