import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { bundleChunks, bundleDir } from '../../helpers/bundle.js';

/**
 * Every chunk of the bundle is ASCII: esbuild escapes non-ASCII characters in code but copies
 * comments as they are, and one "→" in a comment makes V8 keep the whole chunk's source as a
 * two-byte string for the life of the process (12–20 MB more idle RSS with four channels) and
 * decode it on the ES module loader's slower path at every start. scripts/bundle.mjs escapes
 * what esbuild left. Checked on the chunks the last `npm run build` wrote.
 */
describe('the bundle is ASCII', () => {
  it('no chunk holds a byte above 0x7f', () => {
    const chunks = bundleChunks();
    expect(chunks.length).toBeGreaterThan(1);
    const offenders = chunks
      .map((f) => ({ f, at: readFileSync(join(bundleDir, f)).findIndex((b) => b > 0x7f) }))
      .filter((c) => c.at >= 0)
      .map((c) => `${c.f} at byte ${c.at}`);
    expect(offenders).toEqual([]);
  });
});
