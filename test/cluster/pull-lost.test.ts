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

  it('pulls again within about one lease TTL (1.5 s here), not after the 30 s of nats.js defaults: the message waiting meanwhile is answered once', async () => {
    const ns = uniqueNamespace();
    namespaces.push(ns);
    tg = new FakeTelegram();
    await tg.start();
    proxy = await new NatsProxy().start(NATS_URL);
    // The partition consumer's first pull never reaches the server: no message, no idle
    // heartbeat and no expiry notice come back for it.
    const lost = proxy.dropNext(`$JS.API.CONSUMER.MSG.NEXT.${ns}_inbox.p0`);
    d = await startDaemon(
      `${clusterToml(ns, 'instance_id = "q0"\nlease_ttl_ms = 1500\npartitions = 1')}[agent]\nprovider = "echo"\n\n[[channels]]\nid = "tg"\ntype = "telegram"\ntoken_env = "TG_TOKEN"\napi_root = "${tg.url}"\nallow_from = ["*"]\nnative_drafts = false\n`,
      { TG_TOKEN: tg.token, ...clusterEnv, NATS_URL: proxy.url },
    );
    // The pull asks for what bounds the wait: its expiry at the lease TTL and an idle
    // heartbeat every half of it (nats.js's defaults were 30 s and 15 s: the answer below then
    // came 45 s later). Nanoseconds, as JetStream takes them.
    const pull = JSON.parse((await lost).payload) as { expires: number; idle_heartbeat: number };
    expect([pull.expires, pull.idle_heartbeat]).toEqual([1_500_000_000, 750_000_000]);
    const u = { id: 5100, first_name: 'pull' };
    tg.dm('anyone there', u);
    await waitFor(() => tg!.texts(u.id).join() === 'anyone there', 10_000);
    expect(tg.callsOf('sendMessage')).toHaveLength(1);
    expect(d.logs.text).toContain('partition pull went unanswered');
  });
});
