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

/** Sends `n` DMs in waves of 500, as the `memory` scenario does; prints the RSS once a second and the peak. */
async function push(fleet: Fleet, pid: number, n: number, label: string): Promise<void> {
  const started = performance.now();
  const seconds = () => ((performance.now() - started) / 1000).toFixed(1);
  const before = fleet.tg.messages.length;
  let peak = 0;
  let ticks = 0;
  const sampler = setInterval(() => {
    const rss = rssMb(pid);
    peak = Math.max(peak, rss);
    if (ticks++ % 4 === 0) console.log(`  ${seconds()} s: ${rss.toFixed(1)} MB (${rssParts(pid)})`);
  }, 250);
  try {
    for (let sent = 0; sent < n; ) {
      const wave = Math.min(500, n - sent);
      for (let i = 0; i < wave; i++, sent++) fleet.tg.dm(`${label} ${sent}`, { id: 1000 + (sent % 200), first_name: 'u' });
      await waitFor(() => fleet.tg.messages.length - before >= sent, 120_000, 2);
    }
  } finally {
    clearInterval(sampler);
  }
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
    await new Promise((r) => setTimeout(r, 12_000)); // as the scenario: past V8's memory reducer
    const idle = rssMb(pid);
    console.log(`idle: ${idle.toFixed(1)} MB (${rssParts(pid)}); ${await heap(base)}`);
    await push(fleet, pid, 5000, 'warm-up');
    console.log(`  under load: ${await heap(base)}`);
    await new Promise((r) => setTimeout(r, TRIMMED_AFTER_MS));
    console.log(`after the idle trim: ${rssMb(pid).toFixed(1)} MB (${rssParts(pid)}); ${await heap(base)}`);
    await push(fleet, pid, n, 'run');
    console.log(`  under load: ${await heap(base)}`);
  } finally {
    daemon.signal('SIGTERM');
    await daemon.exited;
  }
} finally {
  await fleet.close();
}
