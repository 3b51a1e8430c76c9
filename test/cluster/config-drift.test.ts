import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { partitionOf } from '../../src/cluster/partition-key.js';
import { FakeTelegram } from '../fakes/telegram/server.js';
import { startDaemon, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { clusterEnv, clusterSkipReason, clusterToml, dropNamespace, uniqueNamespace } from '../helpers/cluster.js';

const skip = await clusterSkipReason();

/**
 * A reload is per instance, so while an operator reloads the instances one after another
 * their channels differ: one takes in messages for a channel another does not have yet. The
 * instance consuming such a message's partition used to end its turn "cancelled" and ack it:
 * the message was lost. It now waits there, unacked, until the channel appears.
 */
describe.skipIf(skip !== undefined)(`cluster mode, instances whose channels differ${skip ? ` (skipped: ${skip})` : ''}`, () => {
  const namespaces: string[] = [];
  let tg: FakeTelegram | undefined;
  let daemons: TestDaemon[] = [];
  afterEach(async () => {
    await Promise.all(daemons.map((d) => d.stop().catch(() => {})));
    daemons = [];
    await tg?.close();
    tg = undefined;
  });
  afterAll(async () => {
    for (const ns of namespaces) await dropNamespace(ns);
  });

  it('a message for a channel the consuming instance lacks waits there and is answered once after its reload adds the channel', async () => {
    const ns = uniqueNamespace();
    namespaces.push(ns);
    tg = new FakeTelegram();
    await tg.start();
    const partitions = 2;
    const cluster = (id: string) => clusterToml(ns, `instance_id = "${id}"\nlease_ttl_ms = 1500\npartitions = ${partitions}`);
    const agent = '[agent]\nprovider = "echo"\necho_delay_ms = 5\n';
    const telegram = `[[channels]]\nid = "tg"\ntype = "telegram"\ntoken_env = "TG_TOKEN"\napi_root = "${tg.url}"\nallow_from = ["*"]\nnative_drafts = false\n`;
    const webchat = '[[channels]]\nid = "web"\ntype = "webchat"\n';
    const env = { TG_TOKEN: tg.token, ...clusterEnv };
    const a = await startDaemon(`${cluster('a')}${agent}${telegram}`, env);
    daemons.push(a);
    // b has not been reloaded with the Telegram channel yet.
    const b = await startDaemon(`${cluster('b')}${agent}${webchat}`, env);
    daemons.push(b);
    await waitFor(() => a.daemon.status().cluster!.partitions.owned.length === 1 && b.daemon.status().cluster!.partitions.owned.length === 1, 20_000);
    await waitFor(() => a.daemon.status().channels.find((c) => c.id === 'tg')?.state === 'connected', 10_000);
    const onB = b.daemon.status().cluster!.partitions.owned[0]!;
    const id = Array.from({ length: 100 }, (_, i) => 3000 + i).find((n) => partitionOf(`tg:${n}`, partitions) === onB)!;
    const user = { id, first_name: 'Drift' };
    tg.dm('first', user);
    tg.dm('second', user);
    // b took both from its partition: before, it ended their turns and acked them (lost).
    const ops = (name: string) => b.daemon.status().cluster!.ops[name] ?? 0;
    await waitFor(() => ops('natsDeliveries') >= 2 && (b.logs.text.includes('not configured on this instance') || ops('natsAcks') >= 2), 10_000);
    expect(tg.texts(id)).toEqual([]);
    // The operator reloads b with the channel: the waiting messages are answered, in order, once.
    b.rewrite(`${cluster('b')}${agent}${telegram}${webchat}`);
    await b.daemon.reload();
    await waitFor(() => tg!.texts(id).length === 2, 10_000);
    expect(tg.texts(id)).toEqual(['first', 'second']);
    tg.dm('third', user);
    await waitFor(() => tg!.texts(id).length === 3, 10_000);
    expect(tg.texts(id)).toEqual(['first', 'second', 'third']);
    expect(tg.callsOf('sendMessage')).toHaveLength(3);
  });
});
