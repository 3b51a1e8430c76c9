import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '../helpers/daemon.js';
import { Fleet } from './fleet.js';

/**
 * `npm run bench:profile [N] [--keep]`: the throughput workload (after a warm-up) with the
 * daemon under --cpu-prof, and where its time went by kind of work and by function. Only the
 * samples taken while the N timed messages were handled count: start-up and warm-up are left
 * out (V8's profile clock and the parent's process.hrtime are both CLOCK_MONOTONIC on Linux).
 * What the bare grammy bot does too (the HTTP client) is the floor; everything else is what
 * channeld's guarantees and features cost. `--keep` keeps the .cpuprofile (open it in Chrome
 * DevTools) and prints its path. `--load` profiles the load curve's workload instead: N fresh
 * chats each send one message at once, 2 s streamed answers (drafts on), until every final lands,
 * after two such bursts of N left out (as the load curve measures a warmed-up daemon: the first
 * burst after start-up runs code V8 has not optimized yet). V8 samples every 1,000 µs, so one burst
 * of 1,000 gives a few hundred samples, and a function's self time moves by half between runs;
 * PROFILE_INTERVAL_US=100 samples ten times as often (the profiler's own cost grows with it).
 */
export interface CpuProfile {
  nodes: Array<{ id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }>;
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** Kinds of work, matched on the frames of a sample from the leaf up; the first match wins. */
const kinds: Array<[string, (urls: string[], leaf: string) => boolean]> = [
  ['garbage collection', (_u, leaf) => leaf === '(garbage collector)'],
  ['idle', (_u, leaf) => leaf === '(idle)' || leaf === '(program)'],
  ['module loading (start-up)', (u) => u.some((x) => /modules\/(esm|cjs)|module_job/.test(x))],
  ['SQLite: durable inbox and sessions', (u) => u.some((x) => /better-sqlite3|\/store\//.test(x))],
  ['HTTP client (the bare bot does this too)', (u, leaf) => leaf === 'writev' || u.some((x) => /_http|node:net|node-fetch|grammy|undici|stream_base/.test(x))],
  ['logging', (u) => u.some((x) => /pino|redact|sonic-boom/.test(x))],
  ['ReplyStream (pacing, chunking, drafts)', (u) => u.some((x) => /\/stream\//.test(x))],
  ['runtime (hooks, commands, prompt, agent)', (u) => u.some((x) => /\/runtime\/|\/agent\/|\/workspace\//.test(x))],
  ['dispatch (access, lanes, queue modes)', (u) => u.some((x) => /\/dispatch\//.test(x))],
  ['channel adapter (normalize, render)', (u) => u.some((x) => /dist\/channels\//.test(x))],
];

/** Sample indexes whose time (µs on the profile's clock) falls inside [fromUs, toUs]. */
function inWindow(p: CpuProfile, fromUs = -Infinity, toUs = Infinity): number[] {
  const out: number[] = [];
  let t = p.startTime;
  p.samples.forEach((_s, i) => {
    t += p.timeDeltas[i]!;
    if (t >= fromUs && t <= toUs) out.push(i);
  });
  return out;
}

export function breakdown(p: CpuProfile, fromUs?: number, toUs?: number): Array<{ kind: string; share: number }> {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const totals = new Map<string, number>();
  let all = 0;
  for (const i of inWindow(p, fromUs, toUs)) {
    const leafId = p.samples[i]!;
    const urls: string[] = [];
    for (let id: number | undefined = leafId; id !== undefined; id = parent.get(id)) urls.push(byId.get(id)!.callFrame.url);
    const leaf = byId.get(leafId)!.callFrame.functionName;
    const kind = kinds.find(([, match]) => match(urls, leaf))?.[0] ?? 'other (Node internals)';
    totals.set(kind, (totals.get(kind) ?? 0) + p.timeDeltas[i]!);
    all += p.timeDeltas[i]!;
  }
  return [...totals].map(([kind, t]) => ({ kind, share: t / all })).sort((a, b) => b.share - a.share);
}

/** A frame's short name: function, file (from dist/ or node_modules/ on) and line. */
function frameName(f: { functionName: string; url: string; lineNumber: number }): string {
  const file = f.url.replace(/^.*?\/(dist|node_modules)\//, '$1/').replace(/^file:\/\//, '');
  return `${f.functionName || '(anonymous)'} ${file}${file ? `:${f.lineNumber + 1}` : ''}`;
}

/**
 * The functions that took the most time in the window: self time (the leaf), and total time
 * (anywhere on the stack, counted once per sample) for channeld's own code.
 */
export function topFunctions(
  p: CpuProfile,
  fromUs?: number,
  toUs?: number,
  limit = 25,
): { self: Array<[string, number]>; total: Array<[string, number]>; busyUs: number } {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const self = new Map<string, number>();
  const total = new Map<string, number>();
  let busyUs = 0;
  for (const i of inWindow(p, fromUs, toUs)) {
    const dt = p.timeDeltas[i]!;
    const leaf = byId.get(p.samples[i]!)!.callFrame;
    if (leaf.functionName === '(idle)' || leaf.functionName === '(program)') continue;
    busyUs += dt;
    const name = frameName(leaf);
    self.set(name, (self.get(name) ?? 0) + dt);
    const seen = new Set<string>();
    for (let id: number | undefined = p.samples[i]; id !== undefined; id = parent.get(id)) {
      const f = byId.get(id)!.callFrame;
      if (!/dist\/(src|channels)\//.test(f.url)) continue;
      const n = frameName(f);
      if (seen.has(n)) continue;
      seen.add(n);
      total.set(n, (total.get(n) ?? 0) + dt);
    }
  }
  const top = (m: Map<string, number>) => [...m].sort((a, b) => b[1] - a[1]).slice(0, limit);
  return { self: top(self), total: top(total), busyUs };
}

/** Now on CLOCK_MONOTONIC, in µs: the clock V8 stamps profile samples with on Linux. */
const nowUs = () => Number(process.hrtime.bigint() / 1000n);

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const n = Number(args.find((a) => !a.startsWith('-')) ?? 6000);
  const keep = args.includes('--keep');
  const burst = args.includes('--load');
  // --load: two uncounted bursts of N, as `load` takes before its levels.
  const warm = burst ? 2 * n : 500;
  const interval = process.env.PROFILE_INTERVAL_US;
  if (interval !== undefined && !/^[1-9]\d*$/.test(interval)) throw new Error(`PROFILE_INTERVAL_US must be a whole number of microseconds, not "${interval}"`);
  const dir = mkdtempSync(join(tmpdir(), 'channeld-prof-'));
  const fleet = await new Fleet().start();
  try {
    fleet.write(burst ? { echoDelayMs: 1000, maxInFlight: 12_000, streamMode: 'partial' } : {});
    // The unbundled build, so frames keep their module's path (the bundle's chunks would not
    // tell the store from the SDK); same node flags as the systemd unit.
    const p = fleet.spawn({
      nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${dir}`, ...(interval ? [`--cpu-prof-interval=${interval}`] : [])],
      script: 'dist/bin/channeld.js',
    });
    await waitFor(() => fleet.dc.connected && fleet.sl.socketOpen && fleet.tg.callsOf('getUpdates').length > 0, 60_000);
    let chat = 1000;
    const push = async (count: number, label: string) => {
      const before = fleet.tg.messages.length;
      // --load: one message in each of `count` fresh chats, three words 1 s apart; each
      // answer ends with its final edit.
      if (burst) {
        const calls0 = fleet.tg.calls.length;
        const isFinal = (c: { method: string; body: unknown }) =>
          c.method === 'editMessageText' && String((c.body as { text?: unknown }).text).endsWith('load answer');
        for (let i = 0; i < count; i++) fleet.tg.dm(`${label} load answer`, { id: chat++, first_name: 'u' });
        return waitFor(() => fleet.tg.calls.slice(calls0).filter(isFinal).length >= count, 600_000, 100);
      }
      for (let i = 0; i < count; i++) fleet.tg.dm(`${label} message ${i}`, { id: 1000 + (i % 50), first_name: `user${i % 50}` });
      await waitFor(() => fleet.tg.messages.length - before >= count, 600_000, 5);
    };
    if (burst) for (let i = 0; i < 2; i++) await push(n, 'warm');
    else await push(warm, 'warm');
    const calls0 = fleet.tg.calls.length;
    const from = nowUs();
    const fromMs = Date.now();
    await push(n, 'profile');
    const to = nowUs();
    const perMethod = new Map<string, number>();
    for (const c of fleet.tg.calls.slice(calls0)) perMethod.set(c.method, (perMethod.get(c.method) ?? 0) + 1);
    p.signal('SIGTERM');
    await p.exited;
    const file = join(dir, readdirSync(dir).find((f) => f.endsWith('.cpuprofile'))!);
    const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
    const report = (title: string, fromUs: number, toUs: number) => {
      console.log(`${title} (CPU profile samples):`);
      for (const r of breakdown(profile, fromUs, toUs)) console.log(`${(r.share * 100).toFixed(1).padStart(6)} %  ${r.kind}`);
      const top = topFunctions(profile, fromUs, toUs);
      console.log(`\nbusy CPU ${(top.busyUs / 1000).toFixed(0)} ms, ${(top.busyUs / 1000 / n).toFixed(3)} ms per message`);
      console.log('\nself time, top functions (ms per 1000 messages):');
      for (const [name, us] of top.self) console.log(`${(us / n).toFixed(1).padStart(8)}  ${name}`);
      console.log("\ntotal time, channeld's own functions (ms per 1000 messages):");
      for (const [name, us] of top.total) console.log(`${(us / n).toFixed(1).padStart(8)}  ${name}`);
    };
    report(`where the daemon's time went over ${n} messages after ${warm} of warm-up`, from, to);
    console.log(`Bot API calls per message: ${[...perMethod].map(([m, c]) => `${m} ${(c / n).toFixed(3)}`).join(', ')}`);
    if (burst) {
      // What the first visible p99 measures: the window until the burst's last first message
      // reached the fake (its calls are stamped with Date.now(), taken beside `from`).
      const firsts = fleet.tg.calls.slice(calls0).filter((c) => c.method === 'sendMessage');
      const last = firsts[n - 1];
      if (!last) console.log(`\n${firsts.length} of ${n} first messages were sendMessage calls: no first-message window to report`);
      else {
        const lastFirstUs = from + (last.at - fromMs) * 1000;
        report(`\nuntil the last first message, ${((lastFirstUs - from) / 1000).toFixed(0)} ms after the burst`, from, lastFirstUs);
      }
    }
    if (keep) console.log(`\nprofile kept: ${file}`);
  } finally {
    await fleet.close();
    if (!keep) rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1]?.endsWith('profile.ts')) await main();
