import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { FakeTelegram } from '../fakes/telegram/server.js';
import { Fleet, serviceLaunch, withoutV8Flags } from './fleet.js';

/**
 * `npx tsx test/bench/instructions.ts [N1] [N2] [channeld|bare|both]` (after `npm run build`;
 * defaults 100 400 both): CPU work per message as instructions counted by valgrind's
 * callgrind, which is the same however loaded the machine is (the /proc CPU time of the
 * throughput scenario swings 20–40 % between rounds on a busy machine).
 *
 * Each side runs once under `valgrind --tool=callgrind --smc-check=all-non-file` (V8's JIT
 * writes code into anonymous memory; the check makes valgrind see it), JIT on, as the unit
 * starts it: channeld with its four channels on the Fleet's fakes, the bare grammy echo bot
 * on a fake Bot API. After a warm-up, the counters of all the process's threads are read
 * (`callgrind_control -e Ir`) around a window of N1 messages and then one of N2; instructions
 * per message = (I(N2) − I(N1)) / (N2 − N1), so what a window costs whatever its size (a
 * poll cycle starting or ending) cancels. Valgrind is ~50× slower: the defaults take minutes.
 * BENCH_SCRIPT (see fleet.ts) runs another build of the daemon, e.g. a copy of dist/ under
 * .channeld/, so several builds can be counted at once: the counts do not depend on load.
 * Counts still vary a few percent between runs of one build (GC and JIT timing, batching).
 */

const valgrind = ['--tool=callgrind', '--smc-check=all-non-file', '--callgrind-out-file=/dev/null'];

/** Instructions the process has executed so far, summed over its threads. */
function instructions(pid: number): number {
  const out = execFileSync('callgrind_control', ['-e', 'Ir', String(pid)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  const rows = [...out.matchAll(/^\s+Th\s+\d+\s+([\d,]+)\s*$/gm)];
  if (rows.length === 0) throw new Error(`callgrind_control printed no thread counters:\n${out}`);
  return rows.reduce((sum, m) => sum + Number(m[1]!.replaceAll(',', '')), 0);
}

async function until(cond: () => boolean, what: string, timeoutMs = 1_800_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Pushes `n` DMs over `m` chats and waits for every reply (the throughput scenario's drive, with a wait sized for valgrind). */
async function drive(tg: FakeTelegram, n: number, m: number, label: string): Promise<void> {
  const before = tg.messages.length;
  for (let i = 0; i < n; i++) tg.dm(`${label} message ${i}`, { id: 1000 + (i % m), first_name: `user${i % m}` });
  await until(() => tg.messages.length - before >= n, `${n} replies`);
}

/** Warm-up, then windows of n1 and n2 messages: instructions per message and the two window totals. */
async function measure(pid: number, tg: FakeTelegram, n1: number, n2: number): Promise<{ perMsg: number; i1: number; i2: number }> {
  const m = 50;
  await drive(tg, 200, m, 'warm');
  const c0 = instructions(pid);
  await drive(tg, n1, m, 'one');
  const c1 = instructions(pid);
  await drive(tg, n2, m, 'two');
  const c2 = instructions(pid);
  const i1 = c1 - c0;
  const i2 = c2 - c1;
  return { perMsg: (i2 - i1) / (n2 - n1), i1, i2 };
}

function stop(child: ChildProcess): Promise<unknown> {
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  return exited;
}

async function channeld(n1: number, n2: number): Promise<number> {
  const fleet = await new Fleet().start();
  try {
    fleet.write({ limits: '' });
    const unit = serviceLaunch();
    // Without --expose-gc the memory trimmer is off: it is driven by wall time (at most one
    // trim per 30 s under load), and under valgrind's slowdown it would fire ~50× as often
    // per message as it does at full speed, each trim a few full collections.
    // On node's command line (a build from before CHANNELD_V8_FLAGS, through BENCH_NODE_ARGS) or in the variable.
    const exposeGc = /^--expose[-_]gc$/;
    const nodeArgs = unit.nodeArgs.filter((a) => !exposeGc.test(a));
    const child = spawn('valgrind', [...valgrind, process.execPath, ...nodeArgs, unit.script, 'run', '--config', fleet.configFile], {
      env: { PATH: process.env.PATH, ...withoutV8Flags(unit.env, exposeGc), ...fleet.env },
      stdio: ['ignore', 'ignore', 'ignore'],
    });
    try {
      await until(() => fleet.dc.connected && fleet.sl.socketOpen && fleet.tg.callsOf('getUpdates').length > 0, 'channeld to connect');
      const r = await measure(child.pid!, fleet.tg, n1, n2);
      console.log(`channeld: ${n1} msgs ${r.i1.toExponential(4)} Ir, ${n2} msgs ${r.i2.toExponential(4)} Ir → ${Math.round(r.perMsg)} Ir/msg`);
      return r.perMsg;
    } finally {
      await stop(child);
    }
  } finally {
    await fleet.close();
  }
}

async function bare(n1: number, n2: number): Promise<number> {
  const tg = new FakeTelegram();
  await tg.start();
  const child = spawn('valgrind', [...valgrind, process.execPath, join(import.meta.dirname, 'bare/grammy-echo.mjs')], {
    env: { PATH: process.env.PATH, TG: tg.token, API_ROOT: tg.url },
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  try {
    await new Promise<void>((r) => child.stdout!.once('data', () => r()));
    const r = await measure(child.pid!, tg, n1, n2);
    console.log(`bare:     ${n1} msgs ${r.i1.toExponential(4)} Ir, ${n2} msgs ${r.i2.toExponential(4)} Ir → ${Math.round(r.perMsg)} Ir/msg`);
    return r.perMsg;
  } finally {
    await stop(child);
    await tg.close();
  }
}

async function main(): Promise<void> {
  const [a = '100', b = '400', which = 'both'] = process.argv.slice(2);
  const n1 = Number(a);
  const n2 = Number(b);
  const c = which === 'bare' ? undefined : await channeld(n1, n2);
  const g = which === 'channeld' ? undefined : await bare(n1, n2);
  if (c !== undefined && g !== undefined) console.log(`ratio channeld / bare: ${(c / g).toFixed(2)}× (target ≤ 1.3)`);
}

await main();
