import { describe, expect, it } from 'vitest';
import { PgChannelRecords } from '../../../src/cluster/pg-channel-records.js';
import { SHARED_RECORD_MAX_BYTES } from '../../../src/contracts/shared-record.js';
import { CodedError } from '../../../src/contracts/errors.js';
import { clusterSkipReason, uniqueNamespace } from '../../helpers/cluster.js';
import { waitFor } from '../../helpers/daemon.js';
import { migratedPools } from '../../helpers/pg-schemas.js';

const skip = await clusterSkipReason();
const live = () => new AbortController().signal;
const outcome = (p: Promise<unknown>): Promise<{ resolved?: unknown; rejected?: unknown }> =>
  p.then(
    (v) => ({ resolved: v }),
    (err: unknown) => ({ rejected: err }),
  );

/**
 * The records a channel keeps for every instance (ChannelContext.sharedRecord) in PostgreSQL:
 * what the instance that takes a listener over reads of what another instance wrote.
 */
describe.skipIf(skip !== undefined)(`channel records in PostgreSQL${skip ? ` (skipped: ${skip})` : ''}`, () => {
  const pool = migratedPools();

  it('reads what was written (undefined before), a write replaces the value; namespaces, channels and names are kept apart', async () => {
    const p = await pool(2);
    const [nsA, nsB] = [uniqueNamespace(), uniqueNamespace()];
    const a = new PgChannelRecords(p, nsA);
    const b = new PgChannelRecords(p, nsB);
    const dms = a.record('dc', 'dm-channels');
    expect(await dms.read(live())).toBeUndefined();
    await dms.write('["1","2"]', live());
    // Another instance of the namespace (another object on the same table) reads it.
    expect(await new PgChannelRecords(p, nsA).record('dc', 'dm-channels').read(live())).toBe('["1","2"]');
    await dms.write('["3","1","2"]', live());
    expect(await dms.read(live())).toBe('["3","1","2"]');
    expect((await p.query('SELECT count(*)::int AS n FROM channel_records')).rows[0]).toEqual({ n: 1 });
    // Text round-trips as written, whatever it holds.
    const odd = "it's $1 \\ 'quoted' ünï😀\n";
    await a.record('dc', 'odd').write(odd, live());
    expect(await a.record('dc', 'odd').read(live())).toBe(odd);

    expect(await b.record('dc', 'dm-channels').read(live())).toBeUndefined();
    expect(await a.record('dc2', 'dm-channels').read(live())).toBeUndefined();
    expect(await a.record('dc', 'dm-channels2').read(live())).toBeUndefined();
    await b.record('dc', 'dm-channels').write('["9"]', live());
    expect(await dms.read(live())).toBe('["3","1","2"]');
    expect(await b.record('dc', 'dm-channels').read(live())).toBe('["9"]');
  });

  it('a write stamped before the stored value (one given up that commits late, after a newer one) does not undo it', async () => {
    const p = await pool(2);
    const ns = uniqueNamespace();
    const rec = new PgChannelRecords(p, ns).record('dc', 'dm-channels');
    await rec.write('["newer"]', live());
    // As if the stored value were written after the write below was stamped.
    await p.query('UPDATE channel_records SET updated_at = updated_at + 60000 WHERE namespace = $1', [ns]);
    await rec.write('["older"]', live());
    expect(await rec.read(live())).toBe('["newer"]');
  });

  it('refuses a name outside the bound and a value over SHARED_RECORD_MAX_BYTES (counted in UTF-8 bytes) (SHARED_RECORD_INVALID), writing nothing', async () => {
    const records = new PgChannelRecords(await pool(2), uniqueNamespace());
    for (const name of ['', 'Upper', 'a'.repeat(65), 'with space', '../up', '-first', 'ü'])
      expect(() => records.record('dc', name), name).toThrow(/a shared record's name is 1 to 64 of a-z, 0-9/);
    expect(records.record('dc', 'a'.repeat(64))).toBeDefined();
    const rec = records.record('dc', 'big');
    const full = 'x'.repeat(SHARED_RECORD_MAX_BYTES);
    await rec.write(full, live());
    expect(await rec.read(live())).toBe(full);
    const refused = await outcome(rec.write(`${full}y`, live()));
    expect(refused.rejected).toMatchObject({ code: 'SHARED_RECORD_INVALID' });
    expect(String(refused.rejected)).toMatch(`at most ${SHARED_RECORD_MAX_BYTES} bytes of UTF-8; "big" was given ${SHARED_RECORD_MAX_BYTES + 1}`);
    // Half as many characters, but two bytes each: over the bound too.
    await expect(rec.write('é'.repeat(SHARED_RECORD_MAX_BYTES / 2 + 1), live())).rejects.toMatchObject({ code: 'SHARED_RECORD_INVALID' });
    expect(await rec.read(live())).toBe(full);
  });

  it('stops when its signal aborts: an aborted signal sends nothing, and a client the pool hands over after the caller gave up is given back unused', async () => {
    const p = await pool(1);
    const rec = new PgChannelRecords(p, uniqueNamespace()).record('dc', 'dm-channels');
    const gone = new AbortController();
    gone.abort(new Error('stopped'));
    await expect(rec.write('["1"]', gone.signal)).rejects.toThrow('stopped');
    await expect(rec.read(gone.signal)).rejects.toThrow('stopped');

    // The pool's one client is out: the write waits for it, and is given up meanwhile.
    const held = await p.connect();
    const stop = new AbortController();
    const write = outcome(rec.write('["late"]', stop.signal));
    await waitFor(() => p.waitingCount === 1);
    stop.abort(new Error('given up'));
    expect(String((await write).rejected)).toBe('Error: given up');
    held.release();
    // The client went to the given-up write and came back: the next read gets it, and nothing was written.
    expect(await rec.read(live())).toBeUndefined();
    expect(p.totalCount).toBe(1);
    await rec.write('["2"]', live());
    expect(await rec.read(live())).toBe('["2"]');
  });

  it('rejects with CLUSTER_UNAVAILABLE when PostgreSQL refuses the statement (a schema without the table)', async () => {
    const p = await pool(1);
    await p.query('DROP TABLE channel_records');
    const failed = await outcome(new PgChannelRecords(p, uniqueNamespace()).record('dc', 'dm-channels').write('["1"]', live()));
    expect(failed.rejected).toBeInstanceOf(CodedError);
    expect((failed.rejected as CodedError).code).toBe('CLUSTER_UNAVAILABLE');
    // The connection PostgreSQL answered on is kept.
    expect(p.totalCount).toBe(1);
  });
});
