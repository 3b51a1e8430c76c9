import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { FakeTelegram } from '../fakes/telegram/server.js';
import { startDaemon, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { clusterEnv, clusterSkipReason, clusterToml, dropNamespace, uniqueNamespace, withNats } from '../helpers/cluster.js';

const skip = await clusterSkipReason();

describe.skipIf(skip !== undefined)(`a partition whose consumer is deleted on the server${skip ? ` (skipped: ${skip})` : ''}`, () => {
  const namespaces: string[] = [];
  let tg: FakeTelegram | undefined;
  let d: TestDaemon | undefined;
  afterEach(async () => {
    await d?.stop().catch(() => {});
    await tg?.close();
  });
  afterAll(async () => {
    for (const ns of namespaces) await dropNamespace(ns);
  });
  /** One instance on its own namespace, echoing `echoMs` apart per word. */
  const instance = async (partitions: number, echoMs: number, graceMs: number) => {
    const ns = uniqueNamespace();
    namespaces.push(ns);
    tg = new FakeTelegram();
    await tg.start();
    d = await startDaemon(
      `${clusterToml(ns, `instance_id = "g0"\nlease_ttl_ms = 1500\npartitions = ${partitions}`)}[agent]\nprovider = "echo"\necho_delay_ms = ${echoMs}\n\n[[channels]]\nid = "tg"\ntype = "telegram"\ntoken_env = "TG_TOKEN"\napi_root = "${tg.url}"\nallow_from = ["*"]\nnative_drafts = false\n`,
      { TG_TOKEN: tg.token, ...clusterEnv },
      `shutdown_grace_ms = ${graceMs}`,
    );
    await waitFor(() => d!.daemon.status().cluster!.partitions.owned.length === partitions, 20_000);
    return { ns, tg, d };
  };
  /** An operator's `nats consumer rm` of every partition's consumer under the live owner. */
  const deleteConsumers = async (ns: string, partitions: number) => {
    await withNats(async (nc) => {
      const jsm = await jetstreamManager(nc);
      for (let p = 0; p < partitions; p++) expect(await jsm.consumers.delete(`${ns}_inbox`, `p${p}`)).toBe(true);
    });
  };

  it('is handed back and taken again with a new consumer: every message after the deletion is answered once', async () => {
    const partitions = 2;
    const { ns, tg, d } = await instance(partitions, 60, 2000);
    const users = Array.from({ length: 6 }, (_, i) => ({ id: 3000 + i, first_name: `u${i}` }));
    for (const u of users) tg.dm(`before ${u.id}`, u);
    const answered =
      (...texts: string[]) =>
      (u: { id: number }) =>
        JSON.stringify(tg.texts(u.id)) === JSON.stringify(texts.map((t) => `${t} ${u.id}`));
    await waitFor(() => users.every(answered('before')), 20_000);

    await deleteConsumers(ns, partitions);
    for (const u of users) tg.dm(`after ${u.id}`, u);
    await waitFor(() => users.every(answered('before', 'after')), 20_000);
    expect(tg.callsOf('sendMessage')).toHaveLength(users.length * 2);
    expect(d.logs.text).toContain('partition consumer stopped delivering');
    await waitFor(() => d.daemon.status().cluster!.partitions.owned.length === partitions, 20_000);
  });

  it('a lease lost while the partition is being handed back stops its running turn at once, not after the grace period', async () => {
    // A long answer (40 words 250 ms apart) and a grace of 60 s: the hand-back waits for it.
    const { ns, tg, d } = await instance(1, 250, 60_000);
    const words = Array.from({ length: 40 }, (_, i) => `w${i}`).join(' ');
    const u = { id: 4000, first_name: 'long' };
    tg.dm(words, u);
    await waitFor(() => d.daemon.status().turns.list.some((t) => t.state === 'running') && tg.texts(u.id).length === 1, 20_000);
    await deleteConsumers(ns, 1);
    await waitFor(() => d.logs.text.includes('partition consumer stopped delivering'), 20_000);

    // Another instance's value in the partition's lease key: the owner's next renewal is
    // refused, so the lease is lost in the middle of the hand-back's wait.
    await withNats(async (nc) => {
      const kv = await new Kvm(nc).open(`${ns}_leases`);
      await kv.put('part.0', JSON.stringify({ owner: 'elsewhere', renewedAt: Date.now() }));
    });
    const lost = await waitFor(() => d.logs.entries().find((e) => e.msg === 'partition lease lost; its turns stop here'), 20_000);
    expect(lost.handingBack).toBe(true);
    // The turn is stopped now, long before the 60 s grace or the answer's 10 s would end it.
    await waitFor(() => d.daemon.status().turns.list.length === 0, 20_000);
    expect(tg.texts(u.id).join(' ')).not.toContain('w39');
    await waitFor(() => d.logs.text.includes('partition handed back'), 20_000);
  });
});
