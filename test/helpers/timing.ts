/**
 * The one knob for how long tests wait. Every timeout a test waits on (waitFor, the test and
 * hook timeouts in vitest.config.ts, the process and web chat helpers, browser selectors) is
 * multiplied by this factor, so a busy machine gets more time without any test changing.
 *
 * `CHANNELD_TEST_TIME_SCALE` sets it explicitly; otherwise it is 5 under `CI=true` (where
 * `.ci/run` keeps both cores busy on purpose) and 1 on a developer's machine. Waiting longer
 * never makes a passing test slower: helpers return as soon as the awaited event happens.
 */
function readScale(env: NodeJS.ProcessEnv): number {
  const explicit = env.CHANNELD_TEST_TIME_SCALE;
  if (explicit !== undefined && explicit !== '') {
    const n = Number(explicit);
    if (!Number.isFinite(n) || n <= 0) throw new Error(`CHANNELD_TEST_TIME_SCALE must be a positive number, got "${explicit}"`);
    return n;
  }
  return env.CI && env.CI !== 'false' && env.CI !== '0' ? 5 : 1;
}

export const timeScale = readScale(process.env);

/** `ms` stretched by the time scale: use it for every timeout a test waits on. */
export function scaled(ms: number): number {
  return Math.round(ms * timeScale);
}
