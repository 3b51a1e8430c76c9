import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

/** The `channeld` CLI with the built-in kinds plus the test-only postbox kind (test/fixtures/channels/). */
export const FIXTURE_ENTRY = join(import.meta.dirname, '../fixtures/channeld-with-fixture.ts');

/** Node arguments that let it run the TypeScript entry as it is (tsx's loader). */
export const TSX_NODE_ARGS = ['--import', pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href];
