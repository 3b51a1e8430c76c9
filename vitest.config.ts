import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Two cores: files run in parallel, each in its own process, so signals and ports never collide.
    pool: 'forks',
    // Under CI a JSON report is written too; .ci/run prints its "N passed, N failed" line.
    reporters: process.env.CI ? ['default', 'json'] : ['default'],
    outputFile: { json: '.vitest-report.json' },
  },
});
