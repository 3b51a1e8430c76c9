import { clusterSkipReason } from '../../helpers/cluster.js';
import { Load, ProcessCluster } from '../../cluster/harness.js';
import { percentile, type Row, type ScenarioOptions } from '../report.js';

/**
 * Cluster mode: the same load (1,000 messages over 100 conversations, Telegram polling +
 * Slack HTTP events round-robin, the echo agent streaming five words in 100 ms, replies as
 * final text) on 1, 2 and 3 instances as real processes: throughput, p99 from sending a
 * message to its final answer, and NATS / PostgreSQL operations per message from /status.
 * The full failover run (1,000 messages, kill -9 twice) is test/cluster/processes.test.ts,
 * part of `npm test`.
 */
export async function cluster(o: ScenarioOptions): Promise<Row[]> {
  const skip = await clusterSkipReason();
  if (skip) return [{ scenario: 'cluster', metric: `skipped: ${skip}`, value: 0, unit: '' }];
  const [convs, per] = o.smoke ? [4, 2] : [100, 10];
  const rows: Row[] = [];
  for (const n of o.smoke ? [1] : [1, 2, 3]) {
    // Final-text replies: with streamed drafts every answer waits for the platform's 1 s edit
    // floor, and 10 ordered messages per conversation then bound throughput at about
    // conversations / 1 s, whatever the cluster does. 128 in flight: one instance may run all
    // 100 conversations at once, so 1, 2 and 3 instances face the same load.
    const c = new ProcessCluster({ echoDelayMs: 20, maxInFlight: 128, streamMode: 'final' });
    try {
      await c.start(n);
      const before = await sumOps(c);
      const { latencies, seconds } = await runLoad(c, convs, per);
      // What the load cost: the counters' growth from its first message to its last answer.
      const after = await sumOps(c);
      const ops: Record<string, number> = {};
      for (const [k, v] of Object.entries(after)) ops[k] = v - (before[k] ?? 0);
      const total = convs * per;
      const nats = (ops.natsPublishes ?? 0) + (ops.natsDeliveries ?? 0) + (ops.natsAcks ?? 0) + (ops.natsStops ?? 0);
      // Item writes ride the state's group commit: pgStateWrites counts them, pgReads are the takeovers' item reads.
      const pgOps = (ops.pgReads ?? 0) + (ops.pgStateReads ?? 0) + (ops.pgStateWrites ?? 0);
      rows.push(
        { scenario: 'cluster', metric: `${n} instance(s): ${total} messages over ${convs} conversations, answered`, value: latencies.length, unit: 'msgs' },
        { scenario: 'cluster', metric: `${n} instance(s): throughput`, value: latencies.length / seconds, unit: 'msg/s' },
        { scenario: 'cluster', metric: `${n} instance(s): p99 message → final answer`, value: percentile(latencies, 99), unit: 'ms' },
        { scenario: 'cluster', metric: `${n} instance(s): NATS stream operations per message (publish, delivery, ack)`, value: nats / total, unit: 'ops' },
        // Lease takes and renewals do not grow with the load: per second of the run, all instances.
        {
          scenario: 'cluster',
          metric: `${n} instance(s): NATS KV lease operations per second (independent of load)`,
          value: (ops.natsKvOps ?? 0) / seconds,
          unit: 'ops/s',
        },
        { scenario: 'cluster', metric: `${n} instance(s): PostgreSQL statements per message`, value: pgOps / total, unit: 'ops' },
        { scenario: 'cluster', metric: `${n} instance(s): PostgreSQL commits per message`, value: (ops.pgStateCommits ?? 0) / total, unit: 'ops' },
      );
    } finally {
      await c.close();
    }
  }
  return rows;
}

/**
 * Sends `per` rounds of one message in each of `convs` conversations (Telegram and Slack
 * alternating) at once and waits for every final answer, seen by polling the fakes: each
 * message's latency from sending to its answer, and the seconds from the first message to the
 * last answer (at most 180 s). `ids` picks the chats the conversations use (see `Load`).
 */
export async function runLoad(c: ProcessCluster, convs: number, per: number, ids: readonly number[] = []): Promise<{ latencies: number[]; seconds: number }> {
  const load = new Load(c, convs, per, ids);
  const sentAt = new Map<string, number>();
  const latencies: number[] = [];
  const t0 = performance.now();
  for (let k = 0; k < per; k++) {
    for (let i = 0; i < convs; i++) sentAt.set(load.text(i, k), performance.now());
    await load.round(k);
  }
  const pending = new Set(sentAt.keys());
  const deadline = Date.now() + 180_000;
  while (pending.size && Date.now() < deadline) {
    for (const key of load.sent.keys()) {
      for (const text of load.answers(key)) {
        if (!pending.delete(text)) continue;
        latencies.push(performance.now() - sentAt.get(text)!);
      }
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  return { latencies, seconds: (performance.now() - t0) / 1000 };
}

/** The operation counters of every live instance, added up. */
async function sumOps(c: ProcessCluster): Promise<Record<string, number>> {
  const ops: Record<string, number> = {};
  for (const st of await Promise.all(c.live().map((m) => c.status(m)))) for (const [k, v] of Object.entries(st.cluster.ops)) ops[k] = (ops[k] ?? 0) + v;
  return ops;
}
