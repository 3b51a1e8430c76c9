import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '../helpers/daemon.js';
import { Fleet, rssMb } from './fleet.js';

/**
 * `npm run bench:heap [N]`: what the daemon's heap holds at idle, after a 5,000-message warm-up
 * and after N more (50,000 by default), from V8 heap snapshots (SIGWINCH with
 * --heapsnapshot-signal: SIGUSR2 would also start an upgrade), and what grew between the last two.
 * `npm run bench:heap -- --turns N`: what one running turn keeps instead. N conversations (1,000
 * by default) each send a message to an echo agent that answers its first word and then holds
 * the turn (60 ms per conversation, at least 5 s); the heap once every reply is visible, less the heap at idle after a warm-up burst of the
 * same size, divided by N, is what each turn in flight holds (what a burst promotes and the
 * collector then marks). Also the memory figures the
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
    /^channeld_(turns_in_flight|process_resident_memory_bytes|nodejs_heap_size_total_bytes|nodejs_heap_size_used_bytes|nodejs_external_memory_bytes|nodejs_heap_space_size_total_bytes\{space="\w+"\}) (\S+)$/gm,
  ))
    out[m[1]!] = Number(m[2]);
  return out;
}

type Summary = Map<string, { bytes: number; count: number }>;
type Log = (line: string) => void;

/**
 * The signal that makes the daemon write a heap snapshot (node's --heapsnapshot-signal): one
 * channeld does not handle itself. SIGUSR2 upgrades it and SIGHUP reloads it.
 */
export const SNAPSHOT_SIGNAL = 'SIGWINCH';

/** Throws unless the daemon is still the process it was, having done nothing but snapshots. */
function stillRunning(p: ReturnType<Fleet['spawn']>): void {
  const odd = p.lines.find((l) => /upgrad|reload|stopping/i.test(String(l.msg)));
  if (odd || p.child.exitCode !== null) throw new Error(`the daemon did more than take snapshots: ${odd ? String(odd.msg) : `exited ${p.child.exitCode}`}`);
}

/** The largest growths from one summary to the next, each with its count (per `per` items); returns the total per item. */
function printGrowth(from: Summary, to: Summary, per: number, rows: number, log: Log): number {
  const diff = [...to].map(([k, e]) => [k, e.bytes - (from.get(k)?.bytes ?? 0), e.count - (from.get(k)?.count ?? 0)] as const);
  const fmt = (bytes: number) => (per === 1 ? `${mb(bytes).padStart(7)} MB` : `${(bytes / per).toFixed(0).padStart(7)} B `);
  // Compiled code comes and goes with V8's optimizer, not with what the daemon holds.
  const total = diff.reduce((a, [k, d]) => (k === 'code' ? a : a + d), 0);
  log(`  ${fmt(total)}  in all (compiled code left out)`);
  for (const [k, d, c] of diff.sort((a, b) => b[1] - a[1]).slice(0, rows)) log(`  ${fmt(d)}  ${(c / per).toFixed(per === 1 ? 0 : 1).padStart(8)}  ${k}`);
  return total / per;
}

/**
 * Runs the measure `args` ask for (as the command line gives them) and prints it with `log`; with
 * `--turns`, returns the bytes kept per running turn. Throws when the daemon did anything
 * but take its snapshots (an upgrade, an exit).
 */
export async function main(args: string[], log: Log = console.log): Promise<number | undefined> {
  const turns = args.includes('--turns');
  const n = Number(args.find((a) => !a.startsWith('-')) ?? (turns ? 1000 : 50_000));
  const dir = mkdtempSync(join(tmpdir(), 'channeld-heap-'));
  const fleet = await new Fleet().start();
  try {
    // --turns: each answer's second word comes this long after its first, long enough for a
    // snapshot of all the turns with the first shown.
    const holdMs = Math.max(5_000, 60 * n);
    fleet.write(turns ? { echoDelayMs: holdMs, maxInFlight: 2 * n + 100, streamMode: 'partial' } : {});
    const p = fleet.spawn({ nodeArgs: [`--heapsnapshot-signal=${SNAPSHOT_SIGNAL}`, `--diagnostic-dir=${dir}`] });
    const url = await p.url(30_000);
    await waitFor(() => fleet.dc.connected && fleet.sl.socketOpen && fleet.tg.callsOf('getUpdates').length > 0, 60_000);
    const snap = async (label: string): Promise<Summary> => {
      await new Promise((r) => setTimeout(r, 2000));
      log(
        `${label}: RSS ${rssMb(p.child.pid!).toFixed(1)} MB; ${Object.entries(await metricsOf(url))
          .map(([k, v]) => (k.includes('bytes') ? `${k} ${mb(v)}` : `${k} ${v}`))
          .join(', ')}`,
      );
      const before = new Set(readdirSync(dir));
      p.signal(SNAPSHOT_SIGNAL);
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
      log(`  live heap in the snapshot: ${mb(total)} MB; largest:`);
      for (const [k, e] of [...sum].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, 15))
        log(`    ${mb(e.bytes).padStart(7)} MB  ${String(e.count).padStart(8)}  ${k}`);
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
    let kept: number | undefined;
    if (turns) {
      // Each burst in fresh chats; the first only warms the code up and is answered (and ended) before the baseline.
      const burst = async (first: number): Promise<void> => {
        for (let i = 0; i < n; i++) fleet.tg.dm('kept per turn', { id: first + i, first_name: 'u' });
        const shown = new Set<number>();
        let cursor = 0;
        await waitFor(
          () => {
            for (const calls = fleet.tg.calls; cursor < calls.length; cursor++) {
              const chat = Number((calls[cursor]!.body as { chat_id?: unknown }).chat_id);
              if (calls[cursor]!.method === 'sendMessage' && chat >= first && chat < first + n) shown.add(chat);
            }
            return shown.size >= n;
          },
          180_000,
          20,
        );
      };
      await burst(1_000_000);
      // The warm-up's turns wait out their hold, then end: the baseline is taken with none running.
      await waitFor(async () => (await metricsOf(url)).turns_in_flight === 0, 180_000, 500);
      const idle = await snap('idle, after a warm-up burst');
      await burst(2_000_000);
      const running = await snap(`${n} turns running, each reply visible`);
      log(`\nkept per running turn (bytes, count, largest first):`);
      kept = printGrowth(idle, running, n, 25, log);
    } else {
      await snap('idle');
      await push(5000, 'warm');
      const warm = await snap('after 5000 warm-up messages');
      await push(n, 'run');
      const end = await snap(`after ${n} more`);
      log('\ngrowth between the last two snapshots (largest first):');
      printGrowth(warm, end, 1, 15, log);
    }
    stillRunning(p);
    p.signal('SIGTERM');
    await p.exited;
    return kept;
  } finally {
    await fleet.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1]?.endsWith('heap.ts')) await main(process.argv.slice(2));
