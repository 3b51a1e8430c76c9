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
    }, name === 'cluster' ? 300_000 : 120_000); // the cluster scenario starts real processes on NATS and PostgreSQL
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
