import { waitFor } from '../../helpers/daemon.js';
import { Fleet, spawnBareSdkBot } from '../fleet.js';
import { percentile, type Row, type ScenarioOptions } from '../report.js';

/**
 * Spawn → /readyz 200. Each process listens on port 0 and tells its port (a log line, a line
 * on stdout) as soon as it listens, well before it is ready: no port is picked in advance.
 */
async function readyAfterMs(start: () => { kill(): void; exited: Promise<unknown>; port: Promise<number> }): Promise<number> {
  const t0 = performance.now();
  const proc = start();
  try {
    const port = await proc.port;
    await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.status === 200, 30_000, 2);
    return performance.now() - t0;
  } finally {
    proc.kill();
    await proc.exited;
  }
}

/**
 * Start-up: spawn the built daemon with four channels on fakes; median time to /readyz 200
 * over 5 runs. The floor: a bare process that loads the same three SDKs and connects each
 * to the same fakes.
 */
export async function startup(o: ScenarioOptions): Promise<Row[]> {
  const runs = o.smoke ? 1 : 5;
  const fleet = await new Fleet().start();
  const channeld: number[] = [];
  const bare: number[] = [];
  try {
    fleet.write();
    for (let i = 0; i < runs; i++) {
      channeld.push(
        await readyAfterMs(() => {
          const p = fleet.spawn();
          return { kill: () => p.signal('SIGTERM'), exited: p.exited, port: p.url(30_000).then((u) => Number(new URL(u).port)) };
        }),
      );
    }
    for (let i = 0; i < runs; i++) {
      bare.push(
        await readyAfterMs(() => {
          const { child, exited, port } = spawnBareSdkBot(fleet);
          return { kill: () => child.kill('SIGTERM'), exited, port };
        }),
      );
    }
  } finally {
    await fleet.close();
  }
  const c = percentile(channeld, 50);
  const b = percentile(bare, 50);
  return [
    { scenario: 'startup', metric: `channeld spawn → /readyz 200, median of ${runs}`, value: c, unit: 'ms', target: '< 500 ms', met: c < 500 },
    { scenario: 'startup', metric: 'bare process loading and connecting the same SDKs', value: b, unit: 'ms' },
    { scenario: 'startup', metric: 'ratio channeld / bare', value: c / b, unit: '×' },
  ];
}
