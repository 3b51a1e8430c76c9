import { describe, expect, it } from 'vitest';
import { bundleChunks, chunkText } from '../../helpers/bundle.js';

/**
 * The bundle keeps the names packages check (node-fetch takes a signal only from a class named
 * "AbortSignal", and bundling renames colliding classes) without paying a defineProperty for
 * every closure it creates: scripts/bundle.mjs rewrites esbuild's __name helper so it names
 * constructors only. Checked on the helper the last `npm run build` wrote.
 */
function helper(): (target: unknown, value: string) => unknown {
  const defs = bundleChunks()
    .flatMap((f) => chunkText(f).split('\n'))
    .filter((l) => l.startsWith('var __name = '));
  expect(defs.length).toBeGreaterThan(0);
  // One helper text for every chunk that defines it.
  expect(new Set(defs).size).toBe(1);
  return new Function('__defProp', `${defs[0]}\nreturn __name;`)(Object.defineProperty) as (target: unknown, value: string) => unknown;
}

describe('the bundle names constructors, not closures', () => {
  it('a renamed class or function gets its name back', () => {
    const __name = helper();
    class AbortSignal2 {}
    function fetch2() {}
    expect((__name(AbortSignal2, 'AbortSignal') as { name: string }).name).toBe('AbortSignal');
    expect((__name(fetch2, 'fetch') as { name: string }).name).toBe('fetch');
  });

  it('an arrow or async function is left as it is, with no property defined on it', () => {
    const __name = helper();
    const arrow = () => 1;
    const asyncFn = async () => 1;
    expect(__name(arrow, 'onAbort')).toBe(arrow);
    expect(__name(asyncFn, 'settle')).toBe(asyncFn);
    expect(Object.getOwnPropertyDescriptor(arrow, 'name')?.value).toBe('arrow');
  });
});
