import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '../helpers/daemon.js';
import { DaemonProcess } from '../helpers/process.js';
import { Fleet } from './fleet.js';

/**
 * `npm run bench:profile`: the throughput workload once, with the daemon under --cpu-prof, and
 * where its time went by kind of work. What the bare grammy bot does too (the HTTP client) is
 * the floor; everything else is what channeld's guarantees and features cost.
 */
interface CpuProfile {
  nodes: Array<{ id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }>;
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

export function breakdown(p: CpuProfile): Array<{ kind: string; share: number }> {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const totals = new Map<string, number>();
  let all = 0;
  p.samples.forEach((leafId, i) => {
    const urls: string[] = [];
    for (let id: number | undefined = leafId; id !== undefined; id = parent.get(id)) urls.push(byId.get(id)!.callFrame.url);
    const leaf = byId.get(leafId)!.callFrame.functionName;
    const kind = kinds.find(([, match]) => match(urls, leaf))?.[0] ?? 'other (Node internals)';
    totals.set(kind, (totals.get(kind) ?? 0) + p.timeDeltas[i]!);
    all += p.timeDeltas[i]!;
  });
  return [...totals].map(([kind, t]) => ({ kind, share: t / all })).sort((a, b) => b.share - a.share);
}

async function main(): Promise<void> {
  const n = Number(process.argv[2] ?? 6000);
  const dir = mkdtempSync(join(tmpdir(), 'channeld-prof-'));
  const fleet = await new Fleet().start();
  try {
    fleet.write();
    const p = new DaemonProcess(fleet.configFile, fleet.env, ['--cpu-prof', `--cpu-prof-dir=${dir}`]);
    await waitFor(() => fleet.dc.connected && fleet.sl.socketOpen && fleet.tg.callsOf('getUpdates').length > 0, 60_000);
    for (let i = 0; i < n; i++) fleet.tg.dm(`profile message ${i}`, { id: 1000 + (i % 50), first_name: `user${i % 50}` });
    await waitFor(() => fleet.tg.messages.length >= n, 600_000, 5);
    p.signal('SIGTERM');
    await p.exited;
    const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'))!;
    const rows = breakdown(JSON.parse(readFileSync(join(dir, file), 'utf8')) as CpuProfile);
    console.log(`where the daemon's time went over ${n} messages (CPU profile samples):`);
    for (const r of rows) console.log(`${(r.share * 100).toFixed(1).padStart(6)} %  ${r.kind}`);
  } finally {
    await fleet.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1]?.endsWith('profile.ts')) await main();
