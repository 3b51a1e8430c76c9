import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { midHourMs } from '../fixtures/clock-mid-hour.mjs';

/** The `channeld` CLI with the built-in kinds plus the test-only postbox kind (test/fixtures/channels/). */
export const FIXTURE_ENTRY = join(import.meta.dirname, '../fixtures/channeld-with-fixture.ts');

/** Node arguments that let it run the TypeScript entry as it is (tsx's loader). */
export const TSX_NODE_ARGS = ['--import', pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href];

/**
 * Node arguments and environment that start a daemon with its clock 30 minutes into the
 * current hour (test/fixtures/clock-mid-hour.mjs): for tests of hourly windows, which would
 * otherwise fail when a run crosses the top of the hour.
 */
export function midHourClock(): { nodeArgs: string[]; env: NodeJS.ProcessEnv } {
  return {
    nodeArgs: ['--import', pathToFileURL(join(import.meta.dirname, '../fixtures/clock-mid-hour.mjs')).href],
    env: { CHANNELD_TEST_CLOCK_AT: String(midHourMs()) },
  };
}
