import { jetstreamManager } from '@nats-io/jetstream';
import pg from 'pg';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { formatStatus } from '../../src/actions/builtin/status.js';
import { partitionOf } from '../../src/cluster/partition-key.js';
import { STOP_REPLIES } from '../../src/contracts/topology.js';
import { FakeTelegram } from '../fakes/telegram/server.js';
import { startDaemon, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { clusterEnv, clusterSkipReason, clusterToml, dropNamespace, PG_URL, uniqueNamespace, withNats } from '../helpers/cluster.js';

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

  /**
   * Two instances mid rolling reload: a runs the Telegram channel, b (not reloaded yet) only a
   * web chat. A user whose conversation's partition b consumes sends `texts`; b takes them in
   * and keeps them waiting. `reloadB` is the operator's reload of b with the channel.
   */
  const drifted = async (...texts: string[]) => {
    const ns = uniqueNamespace();
    namespaces.push(ns);
    const fake = new FakeTelegram();
    tg = fake;
    await fake.start();
    const partitions = 2;
    const cluster = (id: string) => clusterToml(ns, `instance_id = "${id}"\nlease_ttl_ms = 1500\npartitions = ${partitions}`);
    const agent = '[agent]\nprovider = "echo"\necho_delay_ms = 5\n';
    const telegram = `[[channels]]\nid = "tg"\ntype = "telegram"\ntoken_env = "TG_TOKEN"\napi_root = "${fake.url}"\nallow_from = ["*"]\nnative_drafts = false\n`;
    const webchat = '[[channels]]\nid = "web"\ntype = "webchat"\n';
    const env = { TG_TOKEN: fake.token, ...clusterEnv };
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
    for (const t of texts) fake.dm(t, user);
    // b took them from its partition: before, it ended their turns and acked them (lost).
    const ops = (name: string) => b.daemon.status().cluster!.ops[name] ?? 0;
    await waitFor(
      () => ops('natsDeliveries') >= texts.length && (b.logs.text.includes('not configured on this instance') || ops('natsAcks') >= texts.length),
      10_000,
    );
    expect(fake.texts(id)).toEqual([]);
    const reloadB = async () => {
      b.rewrite(`${cluster('b')}${agent}${telegram}${webchat}`);
      await b.daemon.reload();
    };
    return { ns, tg: fake, b, id, user, reloadB };
  };

  it('a message for a channel the consuming instance lacks waits there and is answered once after its reload adds the channel', async () => {
    const { tg, id, user, reloadB } = await drifted('first', 'second');
    // The operator reloads b with the channel: the waiting messages are answered, in order, once.
    await reloadB();
    await waitFor(() => tg.texts(id).length === 2, 10_000);
    expect(tg.texts(id)).toEqual(['first', 'second']);
    tg.dm('third', user);
    await waitFor(() => tg.texts(id).length === 3, 10_000);
    expect(tg.texts(id)).toEqual(['first', 'second', 'third']);
    expect(tg.callsOf('sendMessage')).toHaveLength(3);
  });

  it('/status counts the messages waiting for their channel, in all and per channel, until the reload runs them', async () => {
    const { tg, b, id, reloadB } = await drifted('first', 'second');
    // Not turns yet, so `turns.queued` says nothing of them; the operator used to see nothing waiting.
    expect(b.daemon.status().turns.queued).toBe(0);
    expect(b.daemon.status().cluster!.waiting_for_channel).toEqual({ total: 2, by_channel: { tg: 2 } });
    expect(formatStatus(b.daemon.status())).toContain('does not run (reload it): 2 (tg: 2)');
    await reloadB();
    await waitFor(() => tg.texts(id).length === 2, 10_000);
    expect(b.daemon.status().cluster!.waiting_for_channel).toEqual({ total: 0, by_channel: {} });
  });

  it('/stop drops the messages waiting for their channel as it drops queued ones: recorded failed, acked, never answered', async () => {
    const { ns, tg, b, id, user, reloadB } = await drifted('first', 'second');
    tg.dm('/stop', user);
    // It used to answer "Nothing to stop." and the reload then answered both.
    await waitFor(() => tg.texts(id).length === 1, 10_000);
    expect(tg.texts(id)).toEqual([STOP_REPLIES.stopped]);
    // The outcome of a dropped queued item: `failed` with the /stop reason in PostgreSQL, then acked (gone from the work queue).
    await waitFor(() => withNats(async (nc) => (await (await jetstreamManager(nc)).streams.info(`${ns}_inbox`)).state.messages === 0), 10_000);
    const client = new pg.Client({ connectionString: PG_URL });
    await client.connect();
    const { rows } = await client.query(`SELECT state, error FROM ${ns}.items WHERE scope = $1`, [`tg:${id}`]).finally(() => client.end());
    expect(rows).toEqual([
      { state: 'failed', error: 'stopped by /stop' },
      { state: 'failed', error: 'stopped by /stop' },
    ]);
    expect(b.daemon.status().cluster!.waiting_for_channel?.total).toBe(0);
    // The reload adds the channel: the stopped messages stay unanswered, the next one is answered.
    await reloadB();
    tg.dm('third', user);
    await waitFor(() => tg.texts(id).length === 2, 10_000);
    expect(tg.texts(id)).toEqual([STOP_REPLIES.stopped, 'third']);
  });
});
