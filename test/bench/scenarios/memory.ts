import { waitFor } from '../../helpers/daemon.js';
import { Fleet, rssMb, spawnBareSdkBot, TRIMMED_AFTER_MS } from '../fleet.js';
import type { Row, ScenarioOptions } from '../report.js';

/**
 * Pushes `n` messages in waves; returns the highest RSS of `pid` sampled (every 250 ms) while they
 * were handled. `onSample` sees each sample (test/bench/memory-trace.ts prints them).
 */
export async function push(fleet: Fleet, n: number, label: string, pid: number, onSample?: (rssMb: number) => void): Promise<number> {
  const before = fleet.tg.messages.length;
  let peak = 0;
  const sampler = setInterval(() => {
    const rss = rssMb(pid);
    peak = Math.max(peak, rss);
    onSample?.(rss);
  }, 250);
  try {
    // In waves, so the fake's own queue stays small and the daemon sees a steady stream.
    for (let sent = 0; sent < n; ) {
      const wave = Math.min(500, n - sent);
      for (let i = 0; i < wave; i++, sent++) fleet.tg.dm(`${label} ${sent}`, { id: 1000 + (sent % 200), first_name: 'u' });
      await waitFor(() => fleet.tg.messages.length - before >= sent, 120_000, 2).finally(() => (peak = Math.max(peak, rssMb(pid))));
    }
  } finally {
    clearInterval(sampler);
  }
  return peak;
}

/** The floor: the three SDKs loaded and connected to the same fakes, nothing else. */
async function bareIdleRss(fleet: Fleet, settleMs: number): Promise<number> {
  const { child, exited, port: portPromise } = spawnBareSdkBot(fleet);
  try {
    const port = await portPromise;
    await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.status === 200, 30_000);
    await new Promise((r) => setTimeout(r, settleMs));
    return rssMb(child.pid!);
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
}

/**
 * How long the process is left alone before RSS is read: longer than V8's memory reducer waits
 * after allocation stops (8 s) before it shrinks the heap, so every reading is of memory the
 * process holds, not garbage it has not yet given back.
 */
export const SETTLE_MS = 12_000;

/**
 * RSS of the daemon process at idle with web chat, Telegram, Discord and Slack connected to
 * fakes; then after a warm-up of 5,000 messages and after 50,000 more, and the growth.
 */
export async function memory(o: ScenarioOptions): Promise<Row[]> {
  const warm = o.smoke ? 50 : 5000;
  const n = o.smoke ? 100 : 50_000;
  const fleet = await new Fleet().start();
  try {
    fleet.write();
    const p = fleet.spawn();
    try {
      await waitFor(() => fleet.dc.connected && fleet.sl.socketOpen && fleet.tg.callsOf('getUpdates').length > 0, 30_000);
      const settle = (ms: number) => new Promise((r) => setTimeout(r, o.smoke ? 100 : ms));
      await settle(SETTLE_MS);
      const idle = rssMb(p.child.pid!);
      await push(fleet, warm, 'warm', p.child.pid!);
      await settle(TRIMMED_AFTER_MS); // a reading after work is of what the daemon holds at rest
      const warmed = rssMb(p.child.pid!);
      const loaded = await push(fleet, n, 'run', p.child.pid!);
      await settle(TRIMMED_AFTER_MS);
      const after = rssMb(p.child.pid!);
      const growth = ((after - warmed) / warmed) * 100;
      const floor = await bareIdleRss(fleet, o.smoke ? 100 : SETTLE_MS);
      return [
        { scenario: 'memory', metric: 'RSS idle, 4 channels connected', value: idle, unit: 'MB' },
        { scenario: 'memory', metric: 'RSS idle of a bare process with the same SDKs connected (floor)', value: floor, unit: 'MB' },
        { scenario: 'memory', metric: 'ratio idle RSS channeld / floor', value: idle / floor, unit: '×' },
        { scenario: 'memory', metric: `RSS after ${warm} warm-up messages`, value: warmed, unit: 'MB' },
        { scenario: 'memory', metric: `RSS after ${n} more messages`, value: after, unit: 'MB' },
        { scenario: 'memory', metric: 'growth over those messages', value: growth, unit: '%', target: '< 5 %', met: growth < 5 },
        { scenario: 'memory', metric: 'peak RSS under sustained load', value: loaded, unit: 'MB' },
        { scenario: 'memory', metric: 'ratio peak RSS under load / idle', value: loaded / idle, unit: '×', target: '≤ 1.5', met: loaded / idle <= 1.5 },
      ];
    } finally {
      p.signal('SIGTERM');
      await p.exited;
    }
  } finally {
    await fleet.close();
  }
}
