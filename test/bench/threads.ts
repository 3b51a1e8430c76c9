import { readdirSync, readFileSync } from 'node:fs';
import type { FakeTelegram } from '../fakes/telegram/server.js';
import { median } from './report.js';
import { drive, withBareBot, withChanneld } from './scenarios/throughput.js';

/**
 * `npx tsx test/bench/threads.ts [ROUNDS] [N]` (after `npm run build`): where a process's CPU
 * per message goes by thread in the throughput workload (N DMs over 50 chats after 300 of
 * warm-up): the main thread, V8's helper threads (concurrent marking and parallel scavenges of
 * the garbage collector, background compilation), libuv's pool. channeld runs in each variant
 * of `CHANNELD_BENCH_VARIANTS` (JSON: [label, unit heap flags on, extra node flags]; by default
 * the unit's flags, and V8's own old-generation sizing without `--heap-growing-percent=10`),
 * interleaved with the bare grammy bot; each line also gives the peak RSS (VmHWM) over the run.
 */
type Variant = [label: string, unitFlags: boolean, nodeArgs: string[]];

const variants: Variant[] = JSON.parse(
  process.env.CHANNELD_BENCH_VARIANTS ?? '[["unit flags", true, []], ["no growth flag", false, ["--max-semi-space-size=8"]]]',
) as Variant[];

/** CPU ms (user + system) per thread group of a process, from /proc/PID/task/TID/stat. */
function threads(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    } catch {
      continue; // the thread ended meanwhile
    }
    const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const group = tid === String(pid) ? 'main' : /^V8/.test(comm) ? 'V8 helpers (GC, compiler)' : /^libuv/.test(comm) ? 'libuv pool' : 'other';
    out.set(group, (out.get(group) ?? 0) + (Number(f[11]) + Number(f[12])) * 10);
  }
  return out;
}

function peakRssMb(pid: number): number {
  return Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
}

interface Sample {
  rate: number;
  perThread: Map<string, number>;
  totalMs: number;
  peakMb: number;
}

/** Warms up, then times N messages and reads each thread group's CPU before and after. */
async function measure(pid: number, tg: FakeTelegram, n: number, m: number): Promise<Sample> {
  await drive(tg, 300, m, 'warm');
  const before = threads(pid);
  const rate = await drive(tg, n, m, 'run');
  const after = threads(pid);
  const perThread = new Map<string, number>();
  for (const [k, v] of after) perThread.set(k, (v - (before.get(k) ?? 0)) / n);
  return { rate, perThread, totalMs: [...perThread.values()].reduce((a, b) => a + b, 0), peakMb: peakRssMb(pid) };
}

function channeld([, unitFlags, nodeArgs]: Variant, n: number, m: number): Promise<Sample> {
  return withChanneld({ unitFlags, nodeArgs }, (pid, tg) => measure(pid, tg, n, m));
}

function bare(n: number, m: number): Promise<Sample> {
  return withBareBot([], (pid, tg) => measure(pid, tg, n, m));
}

const line = (label: string, s: Sample) =>
  `${label.padEnd(16)} ${s.rate.toFixed(0).padStart(5)} msg/s  CPU ${s.totalMs.toFixed(3)} ms/msg (${[...s.perThread]
    .filter(([, v]) => v >= 0.001)
    .map(([k, v]) => `${k} ${v.toFixed(3)}`)
    .join(', ')})  peak RSS ${s.peakMb.toFixed(0)} MB`;

async function main(): Promise<void> {
  const [rounds = '3', count = '3000'] = process.argv.slice(2);
  const n = Number(count);
  const m = 50;
  const runs = new Map<string, Sample[]>();
  const add = (k: string, s: Sample) => {
    runs.set(k, [...(runs.get(k) ?? []), s]);
    console.log(line(k, s));
  };
  for (let r = 0; r < Number(rounds); r++) {
    for (const v of variants) add(v[0], await channeld(v, n, m));
    add('bare grammy bot', await bare(n, m));
  }
  console.log('\nmedians:');
  const bareCpu = median(runs.get('bare grammy bot')!.map((s) => s.totalMs));
  for (const [k, xs] of runs) {
    const groups = [...new Set(xs.flatMap((s) => [...s.perThread.keys()]))];
    const parts = groups.map((g) => `${g} ${median(xs.map((s) => s.perThread.get(g) ?? 0)).toFixed(3)}`).join(', ');
    const cpu = median(xs.map((s) => s.totalMs));
    console.log(
      `${k.padEnd(16)} CPU ${cpu.toFixed(3)} ms/msg (${(cpu / bareCpu).toFixed(2)}× the bare bot; ${parts}), peak RSS ${median(xs.map((s) => s.peakMb)).toFixed(0)} MB`,
    );
  }
}

await main();
