/**
 * Where the `memory` scenario's peak comes from: the same warm-up and run of messages, with the
 * daemon's RSS split into anonymous and file-backed pages (`/proc/PID/status`) every 250 ms and
 * V8's heap spaces (the daemon's own `/metrics`) at idle, after each push and after the idle
 * trim, plus how many memory trims ran.
 *
 *   npx tsx test/bench/memory-trace.ts [MESSAGES]   (50,000 by default, after 5,000 to warm up)
 */
import { readFileSync } from 'node:fs';
import { waitFor } from '../helpers/daemon.js';
import { Fleet, rssMb, TRIMMED_AFTER_MS } from './fleet.js';
import { push, SETTLE_MS } from './scenarios/memory.js';

const mb = (bytes: number) => (bytes / 2 ** 20).toFixed(1);

/** RSS as anonymous / file-backed MB: the heaps against the pages of the binary and mapped files. */
function rssParts(pid: number): string {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? 0);
  return `${mb(kb('RssAnon') * 1024)} anon / ${mb(kb('RssFile') * 1024)} file`;
}

/** V8's committed heap by space, its external memory, and the trims so far, from the daemon's metrics. */
async function heap(base: string): Promise<string> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const parts: string[] = [];
  for (const m of text.matchAll(/^channeld_nodejs_heap_space_size_total_bytes\{space="(\w+)"\} (\d+)$/gm))
    if (Number(m[2]) > 0) parts.push(`${m[1]} ${mb(Number(m[2]))}`);
  const external = /^channeld_nodejs_external_memory_bytes (\d+)$/m.exec(text)?.[1];
  const trims = [...text.matchAll(/^channeld_memory_trim_seconds_count\{reason="(\w+)"\} (\d+)$/gm)].map((m) => `${m[1]} ${m[2]}`);
  return `heap MB: ${parts.join(', ')}; external ${mb(Number(external ?? 0))}; trims: ${trims.join(', ') || 'none'}`;
}

/** The scenario's push, printing the RSS and its parts once a second, then the peak. */
async function tracedPush(fleet: Fleet, pid: number, n: number, label: string): Promise<void> {
  const started = performance.now();
  const seconds = () => ((performance.now() - started) / 1000).toFixed(1);
  let samples = 0;
  const peak = await push(fleet, n, label, pid, (rss) => {
    if (samples++ % 4 === 0) console.log(`  ${seconds()} s: ${rss.toFixed(1)} MB (${rssParts(pid)})`);
  });
  console.log(`${label}: ${n} messages in ${seconds()} s, peak RSS ${peak.toFixed(1)} MB`);
}

const n = Number(process.argv[2] ?? 50_000);
const fleet = await new Fleet().start();
try {
  fleet.write();
  const daemon = fleet.spawn();
  const pid = daemon.child.pid!;
  try {
    await waitFor(() => fleet.dc.connected && fleet.sl.socketOpen && fleet.tg.callsOf('getUpdates').length > 0, 30_000);
    const base = await daemon.url();
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    console.log(`idle: ${rssMb(pid).toFixed(1)} MB (${rssParts(pid)}); ${await heap(base)}`);
    await tracedPush(fleet, pid, 5000, 'warm-up');
    console.log(`  under load: ${await heap(base)}`);
    await new Promise((r) => setTimeout(r, TRIMMED_AFTER_MS));
    console.log(`after the idle trim: ${rssMb(pid).toFixed(1)} MB (${rssParts(pid)}); ${await heap(base)}`);
    await tracedPush(fleet, pid, n, 'run');
    console.log(`  under load: ${await heap(base)}`);
  } finally {
    daemon.signal('SIGTERM');
    await daemon.exited;
  }
} finally {
  await fleet.close();
}
