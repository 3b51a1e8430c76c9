import type { KV } from '@nats-io/kv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openCluster, type ClusterServices } from '../../src/cluster/connect.js';
import { Leases } from '../../src/cluster/leases.js';
import { clusterSchema } from '../../src/config/schema.js';
import { waitFor } from '../helpers/daemon.js';
import { scaled } from '../helpers/timing.js';
import { clusterSkipReason, dropNamespace, NATS_URL, PG_URL, quietLogger, uniqueNamespace } from '../helpers/cluster.js';

const skip = await clusterSkipReason();

type Watch = { stop(err?: Error): void };
/** The real bucket, with each watch it opens handed to `opened` (to end one as nats.js does: stop() on its iterator). */
function keepWatches(kv: KV, opened: (w: Watch) => void): KV {
  return new Proxy(kv, {
    get(target, prop, receiver) {
      const real = Reflect.get(target, prop, receiver) as unknown;
      if (prop !== 'watch' || typeof real !== 'function') return typeof real === 'function' ? real.bind(target) : real;
      return async (opts: unknown) => {
        const w = await (real as (o: unknown) => Promise<Watch>).call(target, opts);
        opened(w);
        return w;
      };
    },
  });
}

describe.skipIf(skip !== undefined)(`leases in JetStream KV${skip ? ` (skipped: ${skip})` : ''}`, () => {
  const ns = uniqueNamespace();
  const open: ClusterServices[] = [];
  const instance = async (id: string) => {
    const cfg = clusterSchema.parse({ nats_url_env: 'X', postgres_url_env: 'Y', instance_id: id, namespace: ns, postgres_schema: ns, lease_ttl_ms: 1500 });
    const s = await openCluster(cfg, { nats: NATS_URL, postgres: PG_URL }, quietLogger().log);
    open.push(s);
    return s;
  };
  beforeAll(() => {});
  afterAll(async () => {
    await Promise.all(open.map((s) => s.close().catch(() => {})));
    await dropNamespace(ns);
  });

  it('one holder at a time; released leases pass at once; a dead holder’s lease passes after the TTL', async () => {
    const a = await instance('a');
    const b = await instance('b');
    const held = await a.leases.tryAcquire('listener.tg');
    expect(held).toBeDefined();
    await waitFor(() => b.leases.ownerOf('listener.tg') === 'a');
    expect(await b.leases.tryAcquire('listener.tg')).toBeUndefined();
    // Renewals keep it: after two TTLs it is still a's.
    const stillA = await waitFor(() => a.leases.table().find((r) => r.key === 'listener.tg' && r.revision >= 4), 8000);
    expect(stillA.owner).toBe('a');
    expect(held!.signal.aborted).toBe(false);

    await held!.release();
    const ab = new AbortController();
    const byB = await b.leases.acquire('listener.tg', ab.signal);
    expect(byB).toBeDefined();
    await waitFor(() => a.leases.ownerOf('listener.tg') === 'b');

    // b dies without releasing: its NATS connection goes away, so it cannot renew.
    const c = await instance('c');
    const died = Date.now();
    await b.nc.close();
    const byC = await c.leases.acquire('listener.tg', ab.signal);
    expect(byC).toBeDefined();
    expect(Date.now() - died).toBeLessThan(scaled(1500 * 4 + 5000));
    // b fenced itself: its lease signal aborted with the lease-lost code.
    await waitFor(() => byB!.signal.aborted, 5000);
    expect((byB!.signal.reason as { code: string }).code).toBe('CLUSTER_LEASE_LOST');
    await byC!.release();
  });

  it('an instance restarted under its own id right after a kill -9 takes its leases back at once, before its watch has caught up', async () => {
    const first = await instance('r');
    const heartbeat = await first.leases.tryAcquire('inst.r');
    expect(heartbeat).toBeDefined();
    // kill -9: the connection is gone, the key stays until the TTL.
    await first.nc.close();
    const again = await instance('r');
    // Right away, whatever the watch has delivered so far: the key is its own id's.
    const back = await again.leases.tryAcquire('inst.r');
    expect(back).toBeDefined();
    // Someone else's live lease is still refused on first sight.
    const other = await instance('o');
    const theirs = await other.leases.tryAcquire('listener.x');
    expect(theirs).toBeDefined();
    const late = await instance('r2');
    expect(await late.leases.tryAcquire('listener.x')).toBeUndefined();
    await Promise.all([back!.release(), theirs!.release()]);
  });
  it('a key freed while it is being taken (released between the refused create and the read) is taken, not counted as held', async () => {
    const holder = await instance('h');
    const held = await holder.leases.tryAcquire('inst.freed');
    expect(held).toBeDefined();
    const contender = await instance('k');
    // The real bucket, with the holder's release placed exactly in the contender's window:
    // its create was refused (the key was held), and the key is free by the time it reads.
    // A restart under load meets the same when the previous run's delete marker reaches
    // the bucket's max age there; it was refused as "instance id in use".
    let released = false;
    const kv = new Proxy(contender.leases.kv, {
      get(target, prop, receiver) {
        const real = Reflect.get(target, prop, receiver) as unknown;
        if (prop !== 'get' || typeof real !== 'function') return typeof real === 'function' ? real.bind(target) : real;
        return async (key: string) => {
          if (!released) {
            released = true;
            await held!.release();
          }
          return (real as (k: string) => Promise<unknown>).call(target, key);
        };
      },
    });
    const fresh = new Leases(kv, 'k', 1500, quietLogger().log);
    const taken = await fresh.tryAcquire('inst.freed');
    expect(released).toBe(true);
    expect(taken).toBeDefined();
    await taken!.release();
  });
  it('a lease watch whose iterator ends is followed again, and the replay keeps each unchanged key’s age', async () => {
    const a = await instance('wa');
    // The real bucket; the test keeps each watch it opens, to end one as nats.js does when
    // the watch's subscription closes or fails (stop() on its iterator).
    const watches: Watch[] = [];
    const kv = keepWatches(a.leases.kv, (w) => watches.push(w));
    const { log, sink } = quietLogger();
    const w = new Leases(kv, 'ww', 1500, log);
    await w.start();
    const x = await a.leases.tryAcquire('inst.wx');
    await waitFor(() => w.ownerOf('inst.wx') === 'wa');
    await kv.put('once.wz', JSON.stringify({ owner: 'gone', renewedAt: Date.now() }));
    await waitFor(() => w.ownerOf('once.wz') === 'gone');
    const zSeenBy = Date.now();

    watches[0]!.stop();
    const y = await a.leases.tryAcquire('inst.wy');
    // Followed again: a key taken after the end shows, and a's renewals keep its first key live.
    await waitFor(() => w.ownerOf('inst.wy') === 'wa', 5000);
    const revision = w.table('inst.').find((r) => r.key === 'inst.wx')!.revision;
    await waitFor(() => w.table('inst.').find((r) => r.key === 'inst.wx')!.revision > revision, 5000);
    expect(
      w
        .table('inst.')
        .filter((r) => !r.expired)
        .map((r) => r.key),
    ).toEqual(['inst.wx', 'inst.wy']);
    expect(watches.length).toBe(2);
    expect(sink.text).toContain('lease watch ended; following the bucket again');
    // The replay showed the key nobody renews at its old revision: its age still runs from
    // when it was first seen, so it expires on time instead of looking renewed by the replay.
    const ageFloorMs = Date.now() - zSeenBy;
    expect(w.table('once.').find((r) => r.key === 'once.wz')!.ageMs).toBeGreaterThanOrEqual(ageFloorMs);
    await waitFor(() => w.ownerOf('once.wz') === undefined, 5000);

    await w.close();
    expect(watches.length).toBe(2);
    await Promise.all([x!.release(), y!.release()]);
  });
  it('a watch that keeps ending at once is followed again after longer pauses, and a key that holds no lease is skipped without ending the watch', async () => {
    const a = await instance('wb');
    // Each watch the test opens after the first is ended 50 ms after it opens (after the
    // bucket's replay has arrived), three times.
    let toEnd = 0;
    const watches: Watch[] = [];
    const kv = keepWatches(a.leases.kv, (w) => {
      watches.push(w);
      if (toEnd > 0) {
        toEnd--;
        setTimeout(() => w.stop(), 50);
      }
    });
    const { log, sink } = quietLogger();
    const w = new Leases(kv, 'wv', 1500, log);
    await w.start();
    const held = await a.leases.tryAcquire('inst.wb');
    await waitFor(() => w.ownerOf('inst.wb') === 'wb');

    toEnd = 3;
    watches[0]!.stop();
    await waitFor(() => watches.length === 5 && toEnd === 0, 10_000);
    const pauses = sink
      .entries()
      .filter((e) => e.msg === 'lease watch ended; following the bucket again')
      .map((e) => e.retryInMs);
    // The first pause is 100 ms; the second 200, or 100 again if the first watch had run a
    // whole TTL; after that each watch that ended at once doubles it, up to the TTL's third
    // (500 ms): a replay does not start the pauses over.
    expect(pauses).toHaveLength(4);
    expect(pauses[0]).toBe(100);
    expect([100, 200]).toContain(pauses[1]);
    expect(pauses[2]).toBe(2 * (pauses[1] as number));
    expect(pauses[3]).toBe(Math.min(500, 2 * (pauses[2] as number)));

    // Something else wrote a value that is not a lease: it is skipped, the watch goes on.
    await kv.put('inst.junk', 'not json');
    const next = await a.leases.tryAcquire('inst.after-junk');
    await waitFor(() => w.ownerOf('inst.after-junk') === 'wb');
    expect(w.ownerOf('inst.junk')).toBeUndefined();
    expect(sink.text).toContain('lease key holds no lease value; ignored');
    expect(watches.length).toBe(5);
    await w.close();
    await Promise.all([held!.release(), next!.release()]);
  });
});
