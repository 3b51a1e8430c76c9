import { waitFor } from '../../helpers/daemon.js';
import { cpuMs, Fleet, spawnBareSdkBot } from '../fleet.js';
import { median, type Row, type ScenarioOptions } from '../report.js';

/** Wall time from spawn to /readyz 200, and the CPU the process used until then (steady on a busy machine). */
export interface Ready {
  wallMs: number;
  cpuMs: number;
}

/**
 * Spawn → /readyz 200. Each process listens on port 0 and tells its port (a log line, a line
 * on stdout) as soon as it listens, well before it is ready: no port is picked in advance.
 */
export async function readyAfterMs(start: () => { pid: number; kill(): void; exited: Promise<unknown>; port: Promise<number> }): Promise<Ready> {
  const t0 = performance.now();
  const proc = start();
  try {
    const port = await proc.port;
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
 * start-up (the embedded default, no platform SDK) and the unbundled build are timed in the same
 * rounds. channeld runs as the systemd unit runs it (its script and node flags, see serviceLaunch).
 */
export async function startup(o: ScenarioOptions): Promise<Row[]> {
  const runs = o.smoke ? 1 : 7;
  const fleet = await new Fleet().start();
  const channeld: Ready[] = [];
  const bare: Ready[] = [];
  const webOnly: Ready[] = [];
  const unbundled: Ready[] = [];
  const daemonReady = async (only?: 'webchat', script?: string) => {
    fleet.write(only ? { only } : {});
    return readyAfterMs(() => {
      const p = fleet.spawn(script ? { script } : {});
      return { pid: p.child.pid!, kill: () => p.signal('SIGTERM'), exited: p.exited, port: p.url(30_000).then((u) => Number(new URL(u).port)) };
    });
  };
  try {
    for (let i = 0; i < runs; i++) {
      channeld.push(await daemonReady());
      bare.push(
        await readyAfterMs(() => {
          const { child, exited, port } = spawnBareSdkBot(fleet);
          return { pid: child.pid!, kill: () => child.kill('SIGTERM'), exited, port };
        }),
      );
      webOnly.push(await daemonReady('webchat'));
      unbundled.push(await daemonReady(undefined, 'dist/bin/channeld.js'));
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
    // What the bundle (dist/bundle/channeld.js, the systemd unit's script) saves over dist/bin/channeld.js.
    {
      scenario: 'startup',
      metric: 'channeld unbundled (dist/bin/channeld.js), 4 channels, interleaved',
      value: median(unbundled.map((r) => r.wallMs)),
      unit: 'ms',
    },
    { scenario: 'startup', metric: 'CPU until ready, unbundled, 4 channels', value: median(unbundled.map((r) => r.cpuMs)), unit: 'ms' },
  ];
}
