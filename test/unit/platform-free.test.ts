import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { builtinKinds } from '../../channels/registry.js';

const root = join(import.meta.dirname, '../..');

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? filesUnder(join(dir, e.name)) : [join(dir, e.name)]));
}

/**
 * A channel kind is its folder plus one registry line (channels/registry.ts): the core
 * learns about kinds only from the descriptors the entry point hands it.
 */
describe('src/ knows no channel kind', () => {
  const sources = filesUnder(join(root, 'src')).map((f) => ({ file: relative(root, f), text: readFileSync(f, 'utf8') }));

  it('no file under src/ names a shipped kind, not even in a comment', () => {
    // Whole words only: a kind named `irc` must not match `short_circuit`.
    const names = new RegExp(`\\b(?:${builtinKinds.map((k) => k.kind).join('|')})\\b`, 'i');
    expect(sources.filter((s) => names.test(s.text)).map((s) => `${s.file}: ${names.exec(s.text)![0]}`)).toEqual([]);
  });

  it('no file under src/ imports from channels/', () => {
    const fromChannels = /(?:from\s+|import\s*\(\s*)['"](?:\.\.\/)+channels\//;
    expect(sources.filter((s) => fromChannels.test(s.text)).map((s) => s.file)).toEqual([]);
  });
});
