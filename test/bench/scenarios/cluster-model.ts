import { readFileSync } from 'node:fs';
import { clusterSkipReason } from '../../helpers/cluster.js';
import { partitionOf } from '../../../src/cluster/partition-key.js';
import { loadScope, ProcessCluster } from '../../cluster/harness.js';
import { percentile, type Row, type ScenarioOptions } from '../report.js';
import { runLoad } from './cluster.js';

/**
 * Cluster mode where the model is the bottleneck, not the CPU: each instance runs at most
 * `max_in_flight` = 8 turns and each answer takes the model 2 s (the echo agent, five words
 * 500 ms apart), so one instance sustains about 8 conversations at a time. The same backlog
 * (48 conversations × 2 messages, Telegram and Slack alternating, all sent at once) on 1, 2 and
 * 3 instances: the rate at which they are answered and the p99 from message to answer. Target:
 * 2 instances answer ≥ 1.8× the rate of 1. Per instance it reports the answers, the mean
 * slots busy, free slots while another instance had a queue (an uneven split) and CPU (that the
 * processes are not CPU-bound). `CHANNELD_BENCH_PARTITIONS` sets `[cluster] partitions` (16),
 * `CHANNELD_BENCH_MESSAGES` the messages per conversation (2; more weighs the start and the
 * last round less). `CHANNELD_BENCH_SPLIT=even` places the conversations evenly on the
 * instances instead of where the hash of chats 0…47 puts them (see `evenIds`): the ratio it
 * reports is the daemon's own, without the split's rounding, and carries no target.
 */
/**
 * Samples every instance's /status every 250 ms while the load runs: its running turns, and
 * whether its slots sit free while another instance has turns queued (work unevenly split).
 * Answers per instance are its stream acks over the run.
 */
export class Occupancy {
  readonly #busy: number[][] = [];
  #idleWhileQueued = 0;
  #samples = 0;
  readonly #acks0: Promise<number[]>;
  readonly #cpu0: number[];
  readonly #t0 = performance.now();
  readonly #done: Promise<void>;
  #stopped = false;

  constructor(
    private readonly c: ProcessCluster,
    private readonly slots: number,
  ) {
    this.#acks0 = this.#acks();
    this.#cpu0 = this.#cpu();
    this.#done = this.#run();
  }

  async #acks(): Promise<number[]> {
    return Promise.all(this.c.live().map(async (m) => (await this.c.status(m)).cluster.ops.natsAcks ?? 0));
  }

  /** CPU seconds (user + system) each instance's process has used, from /proc (Linux). */
  #cpu(): number[] {
    return this.c.live().map((m) => {
      try {
        const f = readFileSync(`/proc/${m.proc.child.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
        return (Number(f[11]) + Number(f[12])) / 100;
      } catch {
        return Number.NaN;
      }
    });
  }

  async #run(): Promise<void> {
    while (!this.#stopped) {
      const all = await Promise.all(this.c.live().map((m) => this.c.status(m).catch(() => undefined)));
      if (all.every((s) => s)) {
        const turns = all.map((s) => s!.turns);
        this.#samples++;
        // Free slots here while another instance has a queue: the split, not the limit, decides.
        for (const [i, t] of turns.entries()) {
          (this.#busy[i] ??= []).push(t.in_flight);
          if (turns.some((o, j) => j !== i && o.queued > 0)) this.#idleWhileQueued += Math.max(0, this.slots - t.in_flight);
        }
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  async stop(): Promise<{ answered: number[]; busy: number[]; idleWhileQueued: number; cpu: number[] }> {
    this.#stopped = true;
    await this.#done;
    const seconds = (performance.now() - this.#t0) / 1000;
    const cpu = this.#cpu().map((c, i) => (c - (this.#cpu0[i] ?? 0)) / seconds);
    const [a0, a1] = [await this.#acks0, await this.#acks()];
    return {
      answered: a1.map((a, i) => a - (a0[i] ?? 0)),
      busy: this.#busy.map((xs) => xs.reduce((x, y) => x + y, 0) / xs.length),
      idleWhileQueued: this.#idleWhileQueued / Math.max(1, this.#samples),
      cpu,
    };
  }
}

/**
 * `n` instances at the model-bound setup (at most `inFlight` turns each, echo answers of five
 * words `delayMs` apart, final-text replies, `CHANNELD_BENCH_PARTITIONS` partitions, 16 by
 * default), started and settled for `run`, closed after it.
 */
export async function withModelBoundCluster<T>(n: number, inFlight: number, delayMs: number, run: (c: ProcessCluster) => Promise<T>): Promise<T> {
  const c = new ProcessCluster({
    echoDelayMs: delayMs,
    maxInFlight: inFlight,
    streamMode: 'final',
    partitions: Number(process.env.CHANNELD_BENCH_PARTITIONS ?? 16),
  });
  try {
    // A loaded machine may need longer than start()'s 30 s for the partitions to settle.
    await c.start(n).catch(() => c.settled(n, 120_000));
    return await run(c);
  } finally {
    await c.close();
  }
}

/**
 * Chats for `convs` conversations such that conversation `i` lands on live instance ⌊i / 2⌋
 * mod n (a Telegram and a Slack conversation each in turn, as `Load` alternates): for each,
 * the first unused chat whose partition that instance owns now. A burst of 2 messages in each
 * of 48 conversations on 8 slots per instance ends after ⌈turns on the busiest instance / 8⌉
 * rounds of the model's 2 s, so the hash's 46 / 50 takes 7 rounds where 48 / 48 takes 6.
 */
async function evenIds(c: ProcessCluster, convs: number): Promise<number[]> {
  const owned = await Promise.all(c.live().map(async (m) => new Set((await c.status(m)).cluster.partitions.owned)));
  const ids: number[] = [];
  const used = new Set<string>();
  // Past this many chats an instance surely owns none of the partitions they hash to.
  const maxChatId = 100_000;
  for (let i = 0; i < convs; i++) {
    const instance = Math.floor(i / 2) % owned.length;
    const on = owned[instance]!;
    for (let id = 0; ; id++) {
      if (id > maxChatId) throw new Error(`no chat found for instance ${instance}: does it own a partition?`);
      const key = loadScope(i, id);
      if (!used.has(key) && on.has(partitionOf(key, c.partitions))) {
        used.add(key);
        ids[i] = id;
        break;
      }
    }
  }
  return ids;
}

export async function clusterModel(o: ScenarioOptions): Promise<Row[]> {
  const skip = await clusterSkipReason();
  if (skip) return [{ scenario: 'cluster-model', metric: `skipped: ${skip}`, value: 0, unit: '' }];
  const [convs, per] = o.smoke ? [4, 1] : [48, Number(process.env.CHANNELD_BENCH_MESSAGES ?? 2)];
  const inFlight = o.smoke ? 2 : 8;
  const delayMs = o.smoke ? 20 : 500;
  const even = process.env.CHANNELD_BENCH_SPLIT === 'even';
  const rows: Row[] = [];
  const rates = new Map<number, number>();
  for (const n of o.smoke ? [1] : [1, 2, 3]) {
    await withModelBoundCluster(n, inFlight, delayMs, async (c) => {
      const ids = even ? await evenIds(c, convs) : [];
      const sampler = new Occupancy(c, inFlight);
      const { latencies, seconds } = await runLoad(c, convs, per, ids);
      const occ = await sampler.stop();
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
        { scenario: 'cluster-model', metric: `${n} instance(s): answers per instance`, value: 0, unit: occ.answered.join(' / ') },
        {
          scenario: 'cluster-model',
          metric: `${n} instance(s): slots busy per instance (mean over the run)`,
          value: 0,
          unit: occ.busy.map((b) => `${Math.round((100 * b) / inFlight)} %`).join(' / '),
        },
        {
          scenario: 'cluster-model',
          metric: `${n} instance(s): free slots while another instance had turns queued (share of all slot time)`,
          value: (100 * occ.idleWhileQueued) / (n * inFlight),
          unit: '%',
        },
        {
          scenario: 'cluster-model',
          metric: `${n} instance(s): CPU per instance process (share of one core over the run)`,
          value: 0,
          unit: occ.cpu.map((x) => `${Math.round(100 * x)} %`).join(' / '),
        },
      );
    });
  }
  for (const n of [2, 3]) {
    const r = rates.get(n);
    if (r === undefined) continue;
    const ratio = r / rates.get(1)!;
    rows.push({
      scenario: 'cluster-model',
      metric: `${n} instances / 1 instance: answered per second${even ? ' (conversations placed evenly, CHANNELD_BENCH_SPLIT=even: no target)' : ''}`,
      value: ratio,
      unit: '×',
      ...(n === 2 && !even ? { target: '≥ 1.8', met: ratio >= 1.8 } : {}),
    });
  }
  return rows;
}
