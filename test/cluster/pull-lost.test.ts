import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { FakeTelegram } from '../fakes/telegram/server.js';
import { NatsProxy } from '../fakes/nats-proxy.js';
import { startDaemon, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { clusterEnv, clusterSkipReason, clusterToml, dropNamespace, NATS_URL, uniqueNamespace } from '../helpers/cluster.js';

const skip = await clusterSkipReason();

describe.skipIf(skip !== undefined)(`a partition whose pull request is lost on its way to NATS${skip ? ` (skipped: ${skip})` : ''}`, () => {
  const namespaces: string[] = [];
  let tg: FakeTelegram | undefined;
  let proxy: NatsProxy | undefined;
  let d: TestDaemon | undefined;
  afterEach(async () => {
    await d?.stop().catch(() => {});
    await tg?.close();
    await proxy?.close();
  });
  afterAll(async () => {
    for (const ns of namespaces) await dropNamespace(ns);
  });

  /** A namespace, the fake Bot API and a NATS proxy; `start` runs one instance (one partition) through the proxy. */
  const setUp = async () => {
    const ns = uniqueNamespace();
    namespaces.push(ns);
    tg = new FakeTelegram();
    await tg.start();
    proxy = await new NatsProxy().start(NATS_URL);
    const start = async (id: string) =>
      (d = await startDaemon(
        `${clusterToml(ns, `instance_id = "${id}"\nlease_ttl_ms = 1500\npartitions = 1`)}[agent]\nprovider = "echo"\n\n[[channels]]\nid = "tg"\ntype = "telegram"\ntoken_env = "TG_TOKEN"\napi_root = "${tg!.url}"\nallow_from = ["*"]\nnative_drafts = false\n`,
        { TG_TOKEN: tg!.token, ...clusterEnv, NATS_URL: proxy!.url },
      ));
    return { ns, tg, proxy, start };
  };

  it('pulls again within about one lease TTL (1.5 s here), not after the 30 s of nats.js defaults: the message waiting meanwhile is answered once', async () => {
    const { ns, tg, proxy, start } = await setUp();
    // The partition consumer's first pull never reaches the server: no message, no idle
    // heartbeat and no expiry notice come back for it.
    const lost = proxy.dropNext(`$JS.API.CONSUMER.MSG.NEXT.${ns}_inbox.p0`);
    const d = await start('q0');
    // The pull asks for what bounds the wait: its expiry at the lease TTL and an idle
    // heartbeat every half of it (nats.js's defaults were 30 s and 15 s: the answer below then
    // came 45 s later). Nanoseconds, as JetStream takes them.
    const pull = JSON.parse((await lost).payload) as { expires: number; idle_heartbeat: number };
    expect([pull.expires, pull.idle_heartbeat]).toEqual([1_500_000_000, 750_000_000]);
    const u = { id: 5100, first_name: 'pull' };
    tg.dm('anyone there', u);
    await waitFor(() => tg.texts(u.id).join() === 'anyone there', 10_000);
    expect(tg.callsOf('sendMessage')).toHaveLength(1);
    expect(d.logs.text).toContain('partition pull went unanswered');
  });

  // A lease lost while its partition's consumer was being set up (the process starved past the
  // lease's fence) fired its abort before anyone listened: the partition stayed listed as owned,
  // counted in this instance's share, and was consumed by nobody until a restart.
  it('a lease lost while its consumer is set up is let go and taken again: the partition is consumed', async () => {
    const { ns, tg, proxy, start } = await setUp();
    const create = proxy.holdNext(`$JS.API.CONSUMER.CREATE.${ns}_inbox.p0`);
    const d = await start('q1');
    await create.reached;
    // The process stalls past the fence (80 % of the TTL) while the consumer is created; the
    // first timer phase after it wakes fences the lease.
    const until = Date.now() + 1600;
    while (Date.now() < until) {}
    // One turn of the event loop: its timer phase runs the overdue fence before this timer.
    await new Promise((r) => setTimeout(r, 0));
    create.release();
    await waitFor(() => d.logs.entries().filter((e) => e.msg === 'partition acquired').length >= 2, 20_000);
    const u = { id: 5200, first_name: 'stall' };
    tg.dm('still consumed', u);
    await waitFor(() => tg.texts(u.id).join() === 'still consumed', 20_000);
  });
});
