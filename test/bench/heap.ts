import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '../helpers/daemon.js';
import { Fleet, rssMb } from './fleet.js';

/**
 * `npm run bench:heap [N]`: what the daemon's heap holds at idle, after a 5,000-message warm-up
 * and after N more (50,000 by default), from V8 heap snapshots (SIGUSR2 with
 * --heapsnapshot-signal), and what grew between the last two. Also the memory figures the
 * process reports on /metrics at each point, so V8's committed heap, external memory and the
 * rest of RSS (native: SQLite's page cache, malloc arenas, the SDKs' buffers) can be told
 * apart. A snapshot forces a full GC and costs memory itself: read RSS from `npm run bench`.
 */
interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
  nodes: number[];
  strings: string[];
}

/** Self size by "type:name" (constructor for objects), with counts. */
export function summarize(s: Snapshot): Map<string, { bytes: number; count: number }> {
  const f = s.snapshot.meta.node_fields;
  const width = f.length;
  const [iType, iName, iSize] = [f.indexOf('type'), f.indexOf('name'), f.indexOf('self_size')];
  const types = s.snapshot.meta.node_types[0];
  const out = new Map<string, { bytes: number; count: number }>();
  for (let i = 0; i < s.nodes.length; i += width) {
    const type = types[s.nodes[i + iType]!]!;
    // Strings and code are grouped by kind; objects by constructor.
    const name = type === 'object' || type === 'closure' || type === 'native' ? `${type}:${s.strings[s.nodes[i + iName]!]}` : type;
    const e = out.get(name) ?? { bytes: 0, count: 0 };
    e.bytes += s.nodes[i + iSize]!;
    e.count++;
    out.set(name, e);
  }
  return out;
}

const mb = (b: number) => (b / 1024 / 1024).toFixed(2);

async function metricsOf(url: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(
    /^channeld_(process_resident_memory_bytes|nodejs_heap_size_total_bytes|nodejs_heap_size_used_bytes|nodejs_external_memory_bytes|nodejs_heap_space_size_total_bytes\{space="\w+"\}) (\S+)$/gm,
  ))
    out[m[1]!] = Number(m[2]);
  return out;
}

async function main(): Promise<void> {
  const n = Number(process.argv.slice(2).find((a) => !a.startsWith('-')) ?? 50_000);
  const dir = mkdtempSync(join(tmpdir(), 'channeld-heap-'));
  const fleet = await new Fleet().start();
  try {
    fleet.write();
    const p = fleet.spawn({ nodeArgs: ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${dir}`] });
    const url = await p.url(30_000);
    await waitFor(() => fleet.dc.connected && fleet.sl.socketOpen && fleet.tg.callsOf('getUpdates').length > 0, 60_000);
    const snap = async (label: string): Promise<Map<string, { bytes: number; count: number }>> => {
      await new Promise((r) => setTimeout(r, 2000));
      console.log(
        `${label}: RSS ${rssMb(p.child.pid!).toFixed(1)} MB; ${Object.entries(await metricsOf(url))
          .map(([k, v]) => `${k} ${mb(v)}`)
          .join(', ')}`,
      );
      const before = new Set(readdirSync(dir));
      p.signal('SIGUSR2');
      let file = '';
      await waitFor(
        () => {
          file = readdirSync(dir).find((f) => !before.has(f) && f.endsWith('.heapsnapshot')) ?? '';
          return file !== '';
        },
        120_000,
        50,
      );
      // Written in one go: wait until the size stops changing.
      let size = -1;
      await waitFor(
        () => {
          const s = readFileSync(join(dir, file)).length;
          const done = s === size && s > 0;
          size = s;
          return done;
        },
        120_000,
        500,
      );
      const sum = summarize(JSON.parse(readFileSync(join(dir, file), 'utf8')) as Snapshot);
      rmSync(join(dir, file));
      const total = [...sum.values()].reduce((a, e) => a + e.bytes, 0);
      console.log(`  live heap in the snapshot: ${mb(total)} MB; largest:`);
      for (const [k, e] of [...sum].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, 15))
        console.log(`    ${mb(e.bytes).padStart(7)} MB  ${String(e.count).padStart(8)}  ${k}`);
      return sum;
    };
    const push = async (count: number, label: string) => {
      const before = fleet.tg.messages.length;
      for (let sent = 0; sent < count; ) {
        const wave = Math.min(500, count - sent);
        for (let i = 0; i < wave; i++, sent++) fleet.tg.dm(`${label} ${sent}`, { id: 1000 + (sent % 200), first_name: 'u' });
        await waitFor(() => fleet.tg.messages.length - before >= sent, 120_000, 2);
      }
    };
    await snap('idle');
    await push(5000, 'warm');
    const warm = await snap('after 5000 warm-up messages');
    await push(n, 'run');
    const end = await snap(`after ${n} more`);
    console.log('\ngrowth between the last two snapshots (largest first):');
    const diff = [...end].map(([k, e]) => [k, e.bytes - (warm.get(k)?.bytes ?? 0), e.count - (warm.get(k)?.count ?? 0)] as const);
    for (const [k, d, c] of diff.sort((a, b) => b[1] - a[1]).slice(0, 15)) console.log(`  ${mb(d).padStart(7)} MB  ${String(c).padStart(8)}  ${k}`);
    p.signal('SIGTERM');
    await p.exited;
  } finally {
    await fleet.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1]?.endsWith('heap.ts')) await main();
