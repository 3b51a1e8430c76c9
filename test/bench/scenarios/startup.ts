import { waitFor } from '../../helpers/daemon.js';
import { createServer } from 'node:net';
import { Fleet, spawnBareSdkBot } from '../fleet.js';
import { percentile, type Row, type ScenarioOptions } from '../report.js';

export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

async function readyAfterMs(port: number, start: () => { kill(): void; exited: Promise<unknown> }): Promise<number> {
  const t0 = performance.now();
  const proc = start();
  try {
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
    for (let i = 0; i < runs; i++) {
      const port = await freePort();
      fleet.write({ port });
      channeld.push(
        await readyAfterMs(port, () => {
          const p = fleet.spawn();
          return { kill: () => p.signal('SIGTERM'), exited: p.exited };
        }),
      );
    }
    for (let i = 0; i < runs; i++) {
      const port = await freePort();
      bare.push(
        await readyAfterMs(port, () => {
          const { child, exited } = spawnBareSdkBot(fleet, port);
          return { kill: () => child.kill('SIGTERM'), exited };
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
