import { waitFor } from '../../helpers/daemon.js';
import { createServer } from 'node:net';
import { cpuMs, Fleet, spawnBareSdkBot } from '../fleet.js';
import { median, type Row, type ScenarioOptions } from '../report.js';

export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

/** Wall time from spawn to /readyz 200, and the CPU the process used until then (steady on a busy machine). */
interface Ready {
  wallMs: number;
  cpuMs: number;
}

async function readyAfterMs(port: number, start: () => { pid: number; kill(): void; exited: Promise<unknown> }): Promise<Ready> {
  const t0 = performance.now();
  const proc = start();
  try {
    await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.status === 200, 30_000, 2);
    return { wallMs: performance.now() - t0, cpuMs: cpuMs(proc.pid) };
  } finally {
    proc.kill();
    await proc.exited;
  }
}

/**
 * Start-up: spawn the built daemon with four channels on fakes; time to /readyz 200. The
 * floor: a bare process that loads the same three SDKs and connects each to the same fakes.
 * Runs alternate (channeld, bare, channeld, bare …) and medians are compared; the web-chat-only
 * start-up (the embedded default, no platform SDK) is timed in the same rounds.
 */
export async function startup(o: ScenarioOptions): Promise<Row[]> {
  const runs = o.smoke ? 1 : 7;
  const fleet = await new Fleet().start();
  const channeld: Ready[] = [];
  const bare: Ready[] = [];
  const webOnly: Ready[] = [];
  const daemonReady = async (only?: 'webchat') => {
    const port = await freePort();
    fleet.write({ port, ...(only ? { only } : {}) });
    return readyAfterMs(port, () => {
      const p = fleet.spawn();
      return { pid: p.child.pid!, kill: () => p.signal('SIGTERM'), exited: p.exited };
    });
  };
  try {
    for (let i = 0; i < runs; i++) {
      channeld.push(await daemonReady());
      const port = await freePort();
      bare.push(
        await readyAfterMs(port, () => {
          const { child, exited } = spawnBareSdkBot(fleet, port);
          return { pid: child.pid!, kill: () => child.kill('SIGTERM'), exited };
        }),
      );
      webOnly.push(await daemonReady('webchat'));
    }
  } finally {
    await fleet.close();
  }
  const c = median(channeld.map((r) => r.wallMs));
  const b = median(bare.map((r) => r.wallMs));
  const w = median(webOnly.map((r) => r.wallMs));
  const cc = median(channeld.map((r) => r.cpuMs));
  const cb = median(bare.map((r) => r.cpuMs));
  return [
    { scenario: 'startup', metric: `channeld spawn → /readyz 200, 4 channels, median of ${runs}`, value: c, unit: 'ms' },
    { scenario: 'startup', metric: 'bare process loading and connecting the same SDKs, interleaved', value: b, unit: 'ms' },
    { scenario: 'startup', metric: 'ratio channeld / bare (medians)', value: c / b, unit: '×', target: '≤ 1.15', met: c / b <= 1.15 },
    { scenario: 'startup', metric: 'channeld spawn → /readyz 200, web chat only', value: w, unit: 'ms', target: '< 300 ms', met: w < 300 },
    { scenario: 'startup', metric: 'CPU until ready, channeld, 4 channels', value: cc, unit: 'ms' },
    { scenario: 'startup', metric: 'CPU until ready, bare process', value: cb, unit: 'ms' },
    { scenario: 'startup', metric: 'CPU until ready, web chat only', value: median(webOnly.map((r) => r.cpuMs)), unit: 'ms' },
  ];
}
