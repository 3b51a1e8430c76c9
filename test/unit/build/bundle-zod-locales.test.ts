import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { bundleChunks, bundleDir } from '../../helpers/bundle.js';

/**
 * zod's error messages in 64 languages are reachable from its `z` namespace, so bundling kept
 * them all (375 KB that every start read and linked); channeld reports in English, zod's
 * default, and scripts/bundle.mjs gives the bundle a locale index with only that one. Checked on
 * the chunks the last `npm run build` wrote, by the module markers esbuild leaves.
 */
describe("the bundle's zod", () => {
  it('holds the English locale and no other', () => {
    const locales = bundleChunks()
      .flatMap((f) => [...readFileSync(join(bundleDir, f), 'utf8').matchAll(/^\/\/ node_modules\/zod\/v4\/locales\/([\w-]+)\.js$/gm)])
      .map((m) => m[1]);
    expect(locales).toContain('en');
    expect(locales.filter((l) => l !== 'en' && l !== 'index')).toEqual([]);
  });
});
