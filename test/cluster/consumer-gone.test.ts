import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { FakeTelegram } from '../fakes/telegram/server.js';
import { startDaemon, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { NATS_URL, clusterEnv, clusterSkipReason, clusterToml, dropNamespace, uniqueNamespace } from '../helpers/cluster.js';

const skip = await clusterSkipReason();

describe.skipIf(skip !== undefined)(`a partition whose consumer is deleted on the server${skip ? ` (skipped: ${skip})` : ''}`, () => {
  const ns = uniqueNamespace();
  let tg: FakeTelegram | undefined;
  let d: TestDaemon | undefined;
  afterEach(async () => {
    await d?.stop().catch(() => {});
    await tg?.close();
  });
  afterAll(() => dropNamespace(ns));

  it('is handed back and taken again with a new consumer: every message after the deletion is answered once', async () => {
    tg = new FakeTelegram();
    await tg.start();
    const partitions = 2;
    d = await startDaemon(
      `${clusterToml(ns, `instance_id = "g0"\nlease_ttl_ms = 1500\npartitions = ${partitions}`)}[agent]\nprovider = "echo"\n\n[[channels]]\nid = "tg"\ntype = "telegram"\ntoken_env = "TG_TOKEN"\napi_root = "${tg.url}"\nallow_from = ["*"]\nnative_drafts = false\n`,
      { TG_TOKEN: tg.token, ...clusterEnv },
    );
    await waitFor(() => d!.daemon.status().cluster!.partitions.owned.length === partitions, 20_000);
    const users = Array.from({ length: 6 }, (_, i) => ({ id: 3000 + i, first_name: `u${i}` }));
    for (const u of users) tg.dm(`before ${u.id}`, u);
    const answered =
      (...texts: string[]) =>
      (u: { id: number }) =>
        JSON.stringify(tg!.texts(u.id)) === JSON.stringify(texts.map((t) => `${t} ${u.id}`));
    await waitFor(() => users.every(answered('before')), 20_000);

    // An operator's `nats consumer rm` (or JetStream state lost) under a live owner.
    const nc = await connect({ servers: NATS_URL });
    try {
      const jsm = await jetstreamManager(nc);
      for (let p = 0; p < partitions; p++) expect(await jsm.consumers.delete(`${ns}_inbox`, `p${p}`)).toBe(true);
    } finally {
      await nc.close();
    }
    for (const u of users) tg.dm(`after ${u.id}`, u);
    await waitFor(() => users.every(answered('before', 'after')), 20_000);
    expect(tg.callsOf('sendMessage')).toHaveLength(users.length * 2);
    expect(d.logs.text).toContain('partition consumer stopped delivering');
    await waitFor(() => d!.daemon.status().cluster!.partitions.owned.length === partitions, 20_000);
  });
});
