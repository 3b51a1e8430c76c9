import { waitFor } from '../../helpers/daemon.js';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { FakeTelegram } from '../../fakes/telegram/server.js';
import { Fleet } from '../fleet.js';
import { cpuMs } from '../fleet.js';
import { interleaved, median, type Row, type ScenarioOptions } from '../report.js';

/** One timed run: messages per second, CPU milliseconds the bot's process spent per message, and its Bot API calls per message by method. */
export interface Run {
  rate: number;
  cpuPerMsgMs: number;
  callsPerMsg: Record<string, number>;
}

/**
 * Times `drive` and the CPU the process `pid` used meanwhile (robust where the wall clock is
 * not: a busy machine), and counts the Bot API calls it made meanwhile (long polls excluded:
 * they are per batch, not per message).
 */
export async function timed(pid: number, n: number, tg: FakeTelegram, go: () => Promise<number>): Promise<Run> {
  const cpu0 = cpuMs(pid);
  const calls0 = tg.calls.length;
  const rate = await go();
  const cpuPerMsgMs = (cpuMs(pid) - cpu0) / n;
  const callsPerMsg: Record<string, number> = {};
  for (const c of tg.calls.slice(calls0)) if (c.method !== 'getUpdates') callsPerMsg[c.method] = (callsPerMsg[c.method] ?? 0) + 1 / n;
  return { rate, cpuPerMsgMs, callsPerMsg };
}

/** `sendMessage 1.00 + sendChatAction 0.02 = 1.02`, from the last run of a side. */
function callsLine(runs: Run[]): { total: number; detail: string } {
  const calls = runs.at(-1)!.callsPerMsg;
  const total = Object.values(calls).reduce((a, b) => a + b, 0);
  const detail = Object.entries(calls)
    .sort((a, b) => b[1] - a[1])
    .map(([m, v]) => `${m} ${v.toFixed(2)}`)
    .join(' + ');
  return { total, detail: detail || 'none' };
}

/** Pushes `n` DMs over `m` chats and waits until each has its reply; returns messages per second. */
export async function drive(tg: FakeTelegram, n: number, m: number, label: string): Promise<number> {
  const before = tg.messages.length;
  const t0 = performance.now();
  for (let i = 0; i < n; i++) tg.dm(`${label} message ${i}`, { id: 1000 + (i % m), first_name: `user${i % m}` });
  await waitFor(() => tg.messages.length - before >= n, 120_000, 2);
  return n / ((performance.now() - t0) / 1000);
}

/**
 * A fresh daemon with four channels on fresh fakes, run as the unit runs it (`unitFlags`,
 * `script` and `nodeArgs` as Fleet.spawn takes them), connected, for as long as `use` runs;
 * `use` gets the daemon's pid and the fake Bot API.
 */
export async function withChanneld<T>(
  o: { unitFlags?: boolean; script?: string | undefined; nodeArgs?: string[] },
  use: (pid: number, tg: FakeTelegram) => Promise<T>,
): Promise<T> {
  const fleet = await new Fleet().start();
  try {
    fleet.write();
    const p = fleet.spawn({ unitFlags: o.unitFlags !== false, ...(o.script ? { script: o.script } : {}), nodeArgs: o.nodeArgs ?? [] });
    try {
      await waitFor(() => fleet.dc.connected && fleet.sl.socketOpen && fleet.tg.callsOf('getUpdates').length > 0, 120_000);
      return await use(p.child.pid!, fleet.tg);
    } finally {
      p.signal('SIGTERM');
      await p.exited;
    }
  } finally {
    await fleet.close();
  }
}

/** A bare grammy echo bot (node with `nodeArgs`) on a fresh fake, ready, for as long as `use` runs. */
export async function withBareBot<T>(nodeArgs: string[], use: (pid: number, tg: FakeTelegram) => Promise<T>): Promise<T> {
  const tg = new FakeTelegram();
  await tg.start();
  const child = spawn(process.execPath, [...nodeArgs, join(import.meta.dirname, '../bare/grammy-echo.mjs')], {
    env: { PATH: process.env.PATH, TG: tg.token, API_ROOT: tg.url },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    await new Promise<void>((r) => child.stdout!.once('data', () => r()));
    return await use(child.pid!, tg);
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    await tg.close();
  }
}

/** Warms up with `warm` messages, then times `n` over `m` chats. */
async function warmedAndTimed(pid: number, tg: FakeTelegram, n: number, m: number, warm: number): Promise<Run> {
  await drive(tg, warm, m, 'warm');
  return timed(pid, n, tg, () => drive(tg, n, m, 'run'));
}

/** One channeld run: a fresh daemon with four channels on fresh fakes, warmed up, then timed; `script` replaces the unit's (another build, for A/B runs). */
export function channeldRun(n: number, m: number, warm: number, unitFlags = true, script?: string): Promise<Run> {
  return withChanneld({ unitFlags, script }, (pid, tg) => warmedAndTimed(pid, tg, n, m, warm));
}

/** One baseline run: a bare grammy echo bot on a fresh fake, warmed up, then timed. */
export function bareRun(n: number, m: number, warm: number): Promise<Run> {
  return withBareBot([], (pid, tg) => warmedAndTimed(pid, tg, n, m, warm));
}

/**
 * Throughput: the whole pipeline (fake Telegram → grammy → inbox → dispatch → runtime →
 * echo agent → ReplyStream → fake Telegram), with every guarantee on, against a bare grammy
 * echo bot on the same fake. Runs alternate (A B A B …) and the medians are compared.
 */
export async function throughput(o: ScenarioOptions): Promise<Row[]> {
  const n = o.smoke ? 20 : 3000;
  const m = o.smoke ? 5 : 50;
  const warm = o.smoke ? 5 : 300;
  const rounds = o.smoke ? 1 : 3;
  // A B C A B C …: channeld as the unit runs it, the bare bot, and channeld without the unit's
  // V8 heap flags (what bounding memory costs in throughput).
  const defaultHeap: Run[] = [];
  const runs = await interleaved(
    rounds,
    () => channeldRun(n, m, warm),
    async () => {
      const bare = await bareRun(n, m, warm);
      defaultHeap.push(await channeldRun(n, m, warm, false));
      return bare;
    },
  );
  const channeld = median(runs.a.map((r) => r.rate));
  const bare = median(runs.b.map((r) => r.rate));
  const ratio = channeld / bare;
  const cpuC = median(runs.a.map((r) => r.cpuPerMsgMs));
  const cpuB = median(runs.b.map((r) => r.cpuPerMsgMs));
  const cpuD = median(defaultHeap.map((r) => r.cpuPerMsgMs));
  const callsC = callsLine(runs.a);
  const callsB = callsLine(runs.b);
  return [
    { scenario: 'throughput', metric: `Bot API calls per message, channeld: ${callsC.detail}`, value: callsC.total, unit: 'calls' },
    { scenario: 'throughput', metric: `Bot API calls per message, bare bot: ${callsB.detail}`, value: callsB.total, unit: 'calls' },
    { scenario: 'throughput', metric: `channeld, ${n} messages over ${m} chats, median of ${rounds}`, value: channeld, unit: 'msg/s' },
    { scenario: 'throughput', metric: 'bare grammy echo bot, same fake and messages, interleaved', value: bare, unit: 'msg/s' },
    { scenario: 'throughput', metric: 'ratio channeld / bare (medians)', value: ratio, unit: '×', target: '≥ 0.9', met: ratio >= 0.9 },
    { scenario: 'throughput', metric: 'CPU per message, channeld process', value: cpuC, unit: 'ms' },
    { scenario: 'throughput', metric: 'CPU per message, bare bot process', value: cpuB, unit: 'ms' },
    {
      scenario: 'throughput',
      metric: 'CPU ratio channeld / bare (the cost of the guarantees)',
      value: cpuC / cpuB,
      unit: '×',
      target: '≤ 1.3',
      met: cpuC / cpuB <= 1.3,
    },
    {
      scenario: 'throughput',
      metric: "channeld without the unit's V8 heap flags (V8's own sizing), interleaved",
      value: median(defaultHeap.map((r) => r.rate)),
      unit: 'msg/s',
    },
    { scenario: 'throughput', metric: 'CPU per message, channeld without the heap flags', value: cpuD, unit: 'ms' },
    { scenario: 'throughput', metric: 'CPU cost of the heap flags (bounded memory)', value: cpuC / cpuD, unit: '×' },
  ];
}
