import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { exitCodeFor } from '../../../src/cli/exit.js';
import { CodedError } from '../../../src/contracts/errors.js';
import { applyWhenReady, collection, parseV8Flags } from '../../../src/observe/v8-flags.js';

describe('CHANNELD_V8_FLAGS', () => {
  it('takes the growth limit and --expose-gc, in any order, and nothing when unset or blank', () => {
    expect(parseV8Flags('--heap-growing-percent=10 --expose-gc')).toEqual({ heapGrowingPercent: 10, exposeGc: true });
    expect(parseV8Flags('  --expose-gc\t--heap-growing-percent=0 ')).toEqual({ heapGrowingPercent: 0, exposeGc: true });
    expect(parseV8Flags(undefined)).toEqual({ exposeGc: false });
    expect(parseV8Flags('')).toEqual({ exposeGc: false });
  });

  it('takes the flags with "_" in their names as V8 does', () => {
    expect(parseV8Flags('--expose_gc --heap_growing_percent=25')).toEqual({ heapGrowingPercent: 25, exposeGc: true });
  });

  it.each([
    ['--max-semi-space-size=8', 'is not a flag channeld sets itself'],
    ['expose-gc', 'is not a flag channeld sets itself'],
    ['--heap-growing-percent', 'is not a flag channeld sets itself'],
    ['--heap-growing-percent=201', 'the percent is a whole number from 0 to 200'],
    ['--heap-growing-percent=-1', 'the percent is a whole number from 0 to 200'],
    ['--heap-growing-percent=1.5', 'the percent is a whole number from 0 to 200'],
  ])('refuses %s, naming the variable and why, as an operator error (exit 78)', (word, why) => {
    let error: unknown;
    try {
      parseV8Flags(`--expose-gc ${word}`);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(CodedError);
    expect((error as CodedError).code).toBe('V8_FLAGS_INVALID');
    expect((error as CodedError).message).toContain(`CHANNELD_V8_FLAGS: "${word}"`);
    expect((error as CodedError).message).toContain(why);
    expect(exitCodeFor(error)).toBe(78);
  });

  it('sets the growth limit once ready, unless node was started with one (0 there is V8 sizing on its own)', () => {
    const set: string[] = [];
    applyWhenReady({ heapGrowingPercent: 10, exposeGc: true }, ['--max-semi-space-size=8'], (f) => set.push(f));
    applyWhenReady({ heapGrowingPercent: 10, exposeGc: true }, ['--heap-growing-percent=0'], (f) => set.push(f));
    applyWhenReady({ heapGrowingPercent: 10, exposeGc: true }, ['--heap_growing_percent=25'], (f) => set.push(f));
    applyWhenReady({ exposeGc: true }, [], (f) => set.push(f));
    expect(set).toEqual(['--heap-growing-percent=10']);
  });

  it("uses node's own gc when it has one, and makes none unless asked", () => {
    const set: string[] = [];
    const own = () => {};
    (globalThis as { gc?: unknown }).gc = own;
    try {
      expect(collection({ exposeGc: true }, (f) => set.push(f))).toBe(own);
    } finally {
      delete (globalThis as { gc?: unknown }).gc;
    }
    expect(collection({ exposeGc: false }, (f) => set.push(f))).toBeUndefined();
    expect(set).toEqual([]);
  });

  it("gives a working collection without node's flag and keeps Node's code cache; the growth limit set once ready is in force", () => {
    const child = spawnSync(
      process.execPath,
      ['--expose-internals', '--no-warnings', '--import', 'tsx', join(import.meta.dirname, '../../fixtures/v8-flags-child.ts')],
      {
        encoding: 'utf8',
        timeout: 60_000,
      },
    );
    expect(child.status, child.stderr).toBe(0);
    // A built-in module loaded after the collection was made comes from the cache (the flag was
    // turned off again); one loaded after the growth limit was set does not, which shows V8 took it.
    expect(JSON.parse(child.stdout)).toEqual({ collection: 'function', globalGc: 'undefined', afterCollection: true, afterReady: false });
  });
});
