import { afterAll, describe, expect, it } from 'vitest';
import { partitionOf } from '../../src/cluster/partition-key.js';
import { OtlpReceiver } from '../fakes/otlp-receiver.js';
import { FakeTelegram } from '../fakes/telegram/server.js';
import { startDaemon, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { withStarted } from '../helpers/fixtures.js';
import { clusterEnv, clusterSkipReason, clusterToml, dropNamespace, uniqueNamespace } from '../helpers/cluster.js';

const skip = await clusterSkipReason();
const PARTITIONS = 4;

describe.skipIf(skip !== undefined)(`traces in cluster mode${skip ? ` (skipped: ${skip})` : ''}`, () => {
  const ns = uniqueNamespace();
  afterAll(() => dropNamespace(ns));

  it('a message taken in by one instance and answered by the other is one trace: the context travels in the NATS headers', async () => {
    const receiver = await withStarted(new OtlpReceiver());
    const tg = await withStarted(new FakeTelegram());
    const body = (id: string) =>
      `[observe]\notlp_endpoint = "${receiver.url}"\n\n${clusterToml(ns, `instance_id = "${id}"\nlease_ttl_ms = 1500\npartitions = ${PARTITIONS}`)}` +
      `[agent]\nprovider = "echo"\necho_delay_ms = 0\n\n[[channels]]\nid = "tg"\ntype = "telegram"\ntoken_env = "TG_TOKEN"\napi_root = "${tg.url}"\nallow_from = ["*"]\nnative_drafts = false\n`;
    const daemons: TestDaemon[] = [];
    try {
      for (const id of ['a', 'b']) daemons.push(await startDaemon(body(id), { TG_TOKEN: tg.token, ...clusterEnv }));
      await waitFor(() => {
        const owned = daemons.map((d) => d.daemon.status().cluster!.partitions.owned);
        return owned.flat().length === PARTITIONS && owned.every((o) => o.length >= 1);
      }, 20_000);
      const listener = await waitFor(() => daemons.find((d) => d.daemon.status().channels[0]!.state === 'connected'), 10_000);
      const other = daemons.find((d) => d !== listener)!;
      const owned = other.daemon.status().cluster!.partitions.owned;
      const user = Array.from({ length: 200 }, (_, i) => 6000 + i).find((n) => owned.includes(partitionOf(`tg:${n}`, PARTITIONS)))!;
      tg.dm('hello across instances', { id: user, first_name: 'Ada' });
      await waitFor(() => tg.texts(user).includes('hello across instances'), 15_000);
      // The final text reaches the chat just before the turn's last log line: wait for the line.
      const answeredBy = await waitFor(() => other.logs.entries().find((l) => l.msg === 'turn finished'), 10_000);
      await Promise.all(daemons.map((d) => d.stop()));
      await waitFor(() => receiver.spans.some((s) => s.name === 'deliver'), 10_000);

      const listenerId = listener === daemons[0] ? 'a' : 'b';
      const otherId = listenerId === 'a' ? 'b' : 'a';
      const root = receiver.spans.find((s) => s.name === 'receive' && s.attributes['channeld.message.taken'] === true)!;
      expect(root.instance).toBe(listenerId);
      const spans = receiver.trace(root.traceId);
      const named = (name: string) => spans.find((s) => s.name === name)!;
      const publish = named('store publish');
      expect(publish).toMatchObject({ instance: listenerId, parentSpanId: root.spanId, kind: 4 });
      // On the other instance, under the publish whose context its NATS headers carried.
      for (const name of ['queued', 'turn']) expect(named(name), name).toMatchObject({ instance: otherId, parentSpanId: publish.spanId });
      const turn = named('turn');
      expect(named('deliver')).toMatchObject({ instance: otherId, parentSpanId: turn.spanId });
      expect(spans.some((s) => s.instance === otherId && s.attributes['channeld.platform.method'] === 'sendMessage')).toBe(true);
      // The log line of the turn, on the other instance, names the same trace.
      expect(answeredBy!.trace_id).toBe(root.traceId);
    } finally {
      await Promise.all(daemons.map((d) => d.stop().catch(() => {})));
      await tg.close();
    }
  });
});
