import { describe, expect, it } from 'vitest';
import { HookRegistry, sortHooks } from '../../../src/runtime/hooks.js';
import type { Hook } from '../../../src/contracts/hooks.js';

const h = (name: string, over: Partial<Hook> = {}): Hook => ({ phase: 'pre_execute', name, run: () => {}, ...over });
const names = (hooks: readonly Hook[]) => hooks.map((x) => x.name);

describe('hook ordering', () => {
  it('orders by before/after first, then priority, then name', () => {
    const order = sortHooks([
      h('c', { priority: 1 }),
      h('b', { priority: 50 }),
      h('a', { priority: 50 }),
      h('z', { priority: 200, before: ['c'] }),
      h('y', { after: ['b'], priority: 0 }),
    ]);
    // Among hooks whose predecessors ran, the lowest (priority, name) goes next.
    expect(names(order)).toEqual(['a', 'b', 'y', 'z', 'c']);
  });

  it('is deterministic whatever the registration order', () => {
    const hooks = [h('m'), h('k', { priority: 10 }), h('x', { after: ['m'] }), h('a')];
    const expected = names(sortHooks(hooks));
    expect(names(sortHooks([...hooks].reverse()))).toEqual(expected);
    expect(expected).toEqual(['k', 'a', 'm', 'x']);
  });

  it('ignores before/after names that are not registered', () => {
    expect(names(sortHooks([h('a', { before: ['ghost'] }), h('b', { after: ['phantom'] })]))).toEqual(['a', 'b']);
  });

  it('rejects a cycle at registration, naming it, and keeps the old order', () => {
    const reg = new HookRegistry();
    reg.register(h('a', { before: ['b'] }));
    reg.register(h('b'));
    expect(() => reg.register(h('c', { before: ['a'], after: ['b'] }))).toThrow(
      expect.objectContaining({ code: 'HOOK_CYCLE', message: expect.stringMatching(/a, b, c/) }),
    );
    expect(names(reg.ordered('pre_execute'))).toEqual(['a', 'b']);
  });

  it('rejects a duplicate name in a phase', () => {
    const reg = new HookRegistry();
    reg.register(h('a'));
    expect(() => reg.register(h('a'))).toThrow(expect.objectContaining({ code: 'HOOK_DUPLICATE' }));
    expect(() => reg.register(h('a', { phase: 'finally' }))).not.toThrow();
  });

  it('caches the order and invalidates it on registration and removal', () => {
    const reg = new HookRegistry();
    reg.register(h('b'));
    const first = reg.ordered('pre_execute');
    expect(reg.ordered('pre_execute')).toBe(first);
    const remove = reg.register(h('a'));
    expect(names(reg.ordered('pre_execute'))).toEqual(['a', 'b']);
    remove();
    expect(names(reg.ordered('pre_execute'))).toEqual(['b']);
  });
});
