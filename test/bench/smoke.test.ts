import { describe, expect, it } from 'vitest';
import { scenarios } from './scenarios/index.js';

// One tiny iteration of each scenario, so the harness cannot rot. Figures are not asserted:
// speed belongs to `npm run bench`, not to tests.
describe('bench harness smoke', () => {
  for (const [name, run] of Object.entries(scenarios)) {
    it(`${name} runs and reports figures`, async () => {
      const rows = await run({ smoke: true });
      expect(rows.length).toBeGreaterThan(0);
      for (const r of rows) expect(Number.isFinite(r.value)).toBe(true);
    }, 120_000);
  }
});

describe('soak harness smoke', () => {
  it('runs briefly with faults and a kill -9, and accounts for every message', async () => {
    const { soak } = await import('./soak.js');
    const r = await soak(6, () => {}, 15_000);
    expect(r.sent).toBeGreaterThan(20);
    expect(r.restarts).toBe(1);
    expect(r.answered + r.duplicated + r.lost).toBe(r.sent);
    // The soak's verdict (zero lost, zero duplicated) is printed by `npm run soak`; the
    // smoke only proves the harness runs end to end.
  }, 180_000);
});

describe('profile breakdown', () => {
  it('attributes each sample to the first kind of work on its stack, leaf up', async () => {
    const { breakdown } = await import('./profile.js');
    const frame = (id: number, url: string, children: number[] = [], functionName = 'f') => ({ id, callFrame: { functionName, url, lineNumber: 0 }, children });
    const rows = breakdown({
      nodes: [
        frame(1, '', [2, 4], '(root)'),
        frame(2, 'file:///x/dist/src/dispatch/dispatcher.js', [3]),
        frame(3, 'file:///x/node_modules/better-sqlite3/lib/methods/transaction.js'),
        frame(4, '', [], '(garbage collector)'),
      ],
      samples: [3, 3, 2, 4],
      timeDeltas: [10, 10, 10, 10],
    });
    expect(rows).toEqual([
      { kind: 'SQLite: durable inbox and sessions', share: 0.5 },
      { kind: 'dispatch (access, lanes, queue modes)', share: 0.25 },
      { kind: 'garbage collection', share: 0.25 },
    ]);
  });
});
