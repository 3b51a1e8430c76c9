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
