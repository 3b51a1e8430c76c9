import { defineConfig } from 'vitest/config';
import { scaled } from './test/helpers/timing.js';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Sized for an idle machine and stretched by the one test time scale (test/helpers/timing.ts):
    // 5× under CI=true, where .ci/run keeps both cores busy on purpose.
    testTimeout: scaled(30_000),
    hookTimeout: scaled(30_000),
    // Files run in parallel, each in its own process, so signals and ports never collide.
    pool: 'forks',
    // Most of a file's time is spent waiting on the daemons, servers and fakes it starts, not on
    // the CPU: vitest's default (one worker fewer than cores, so one on this two-core machine)
    // left the machine idle and the suite long. CHANNELD_TEST_WORKERS overrides.
    maxWorkers: Number(process.env.CHANNELD_TEST_WORKERS ?? 4),
    // Under CI a JSON report is written too; .ci/run prints its "N passed, N failed" line.
    reporters: process.env.CI ? ['default', 'json'] : ['default'],
    outputFile: { json: '.vitest-report.json' },
  },
});
