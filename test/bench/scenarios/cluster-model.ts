import { clusterSkipReason } from '../../helpers/cluster.js';
import { ProcessCluster } from '../../cluster/harness.js';
import { percentile, type Row, type ScenarioOptions } from '../report.js';
import { runLoad } from './cluster.js';

/**
 * Cluster mode where the model is the bottleneck, not the CPU: each instance runs at most
 * `max_in_flight` = 8 turns and each answer takes the model 2 s (the echo agent, five words
 * 500 ms apart), so one instance sustains about 8 conversations at a time. The same backlog
 * (48 conversations × 2 messages, Telegram and Slack alternating, all sent at once) on 1, 2 and
 * 3 instances: the rate at which they are answered and the p99 from message to answer. Target:
 * 2 instances answer ≥ 1.8× the rate of 1.
 */
export async function clusterModel(o: ScenarioOptions): Promise<Row[]> {
  const skip = await clusterSkipReason();
  if (skip) return [{ scenario: 'cluster-model', metric: `skipped: ${skip}`, value: 0, unit: '' }];
  const [convs, per] = o.smoke ? [4, 1] : [48, 2];
  const inFlight = o.smoke ? 2 : 8;
  const delayMs = o.smoke ? 20 : 500;
  const rows: Row[] = [];
  const rates = new Map<number, number>();
  for (const n of o.smoke ? [1] : [1, 2, 3]) {
    const c = new ProcessCluster({ echoDelayMs: delayMs, maxInFlight: inFlight, streamMode: 'final' });
    try {
      // A loaded machine may need longer than start()'s 30 s for the partitions to settle.
      await c.start(n).catch(() => c.settled(n, 120_000));
      const { latencies, seconds } = await runLoad(c, convs, per);
      const rate = latencies.length / seconds;
      rates.set(n, rate);
      rows.push(
        {
          scenario: 'cluster-model',
          metric: `${n} instance(s), ${inFlight} in flight each: ${convs * per} messages answered`,
          value: latencies.length,
          unit: 'msgs',
        },
        { scenario: 'cluster-model', metric: `${n} instance(s): answered per second`, value: rate, unit: 'msg/s' },
        {
          scenario: 'cluster-model',
          metric: `${n} instance(s): conversations in flight, sustained (rate × model time)`,
          value: (rate * 4 * delayMs) / 1000,
          unit: 'convs',
        },
        { scenario: 'cluster-model', metric: `${n} instance(s): p99 message → answer`, value: percentile(latencies, 99), unit: 'ms' },
      );
    } finally {
      await c.close();
    }
  }
  for (const n of [2, 3]) {
    const r = rates.get(n);
    if (r === undefined) continue;
    const ratio = r / rates.get(1)!;
    rows.push({
      scenario: 'cluster-model',
      metric: `${n} instances / 1 instance: answered per second`,
      value: ratio,
      unit: '×',
      ...(n === 2 ? { target: '≥ 1.8', met: ratio >= 1.8 } : {}),
    });
  }
  return rows;
}
