import { describe, expect, it } from 'vitest';
import { Kernel } from '../../../src/kernel/kernel.js';
import { planStart } from '../../../src/kernel/plan.js';
import type { Component } from '../../../src/kernel/component.js';
import type { CodedError } from '../../../src/contracts/errors.js';

/** A component that records its start and its disposal into `log`. */
function recorder(log: string[], name: string, extra: Partial<Component> = {}): Component {
  return {
    name,
    ...extra,
    start: async (ctx) => {
      log.push(`start ${name}`);
      for (const s of extra.provides ?? []) ctx.provide(s, { from: name });
      ctx.effect(() => void log.push(`dispose ${name}`));
      await extra.start?.(ctx);
    },
  };
}

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    return (err as CodedError).code;
  }
  return undefined;
}

describe('start plan', () => {
  it('starts providers before the components that inject them, whatever the input order', () => {
    const order = planStart([
      { name: 'c', inject: ['b'], start() {} },
      { name: 'b', inject: ['a'], provides: ['b'], start() {} },
      { name: 'a', provides: ['a'], start() {} },
    ]).map((p) => p.name);
    expect(order).toEqual(['a', 'b', 'c']);
  });

  it('starts independent components in the order they are listed, not sorted by name', () => {
    const order = planStart([
      { name: 'zeta', start() {} },
      { name: 'alpha', start() {} },
      { name: 'mid', inject: ['db'], start() {} },
      { name: 'beta', provides: ['db'], start() {} },
    ]).map((p) => p.name);
    expect(order).toEqual(['zeta', 'alpha', 'beta', 'mid']);
  });

  it('rejects a missing service, naming the component and the service', () => {
    expect(codeOf(() => planStart([{ name: 'x', inject: ['db'], start() {} }]))).toBe('KERNEL_MISSING_SERVICE');
    expect(() => planStart([{ name: 'x', inject: ['db'], start() {} }])).toThrow(/component "x" injects "db", which no component provides/);
  });

  it('rejects two providers of one service', () => {
    const components = [
      { name: 'a', provides: ['db'], start() {} },
      { name: 'b', provides: ['db'], start() {} },
    ];
    expect(codeOf(() => planStart(components))).toBe('KERNEL_DUPLICATE_PROVIDER');
    expect(() => planStart(components)).toThrow(/"a" and "b"/);
  });

  it('rejects a name that is not a declared service, before anything starts', () => {
    const known = new Set(['db', 'log']);
    expect(codeOf(() => planStart([{ name: 'x', inject: ['dbb'], start() {} }], { known }))).toBe('KERNEL_UNKNOWN_SERVICE');
    expect(() => planStart([{ name: 'y', provides: ['cache'], start() {} }], { known })).toThrow(
      /component "y" names "cache", which is not a declared service/,
    );
    expect(
      planStart(
        [
          { name: 'z', provides: ['db'], inject: ['log'], start() {} },
          { name: 'l', provides: ['log'], start() {} },
        ],
        { known },
      ).map((p) => p.name),
    ).toEqual(['l', 'z']);
  });

  it('rejects a cycle, naming it', () => {
    const components = [
      { name: 'a', provides: ['a'], inject: ['b'], start() {} },
      { name: 'b', provides: ['b'], inject: ['a'], start() {} },
    ];
    expect(codeOf(() => planStart(components))).toBe('KERNEL_CYCLE');
    expect(() => planStart(components)).toThrow(/components depend on each other: a → b → a/);
  });
});

describe('Kernel', () => {
  it('checks the plan before starting anything', async () => {
    const log: string[] = [];
    const k = new Kernel();
    await expect(k.load(recorder(log, 'a', { provides: ['a'] }), recorder(log, 'b', { inject: ['missing'] }))).rejects.toMatchObject({
      code: 'KERNEL_MISSING_SERVICE',
    });
    expect(log).toEqual([]);
  });

  it('rolls back the failing component effects, then every started component in reverse order', async () => {
    const log: string[] = [];
    const k = new Kernel();
    const failing: Component = {
      name: 'c',
      inject: ['b'],
      start: (ctx) => {
        log.push('start c');
        ctx.effect(() => void log.push('dispose c.1'));
        ctx.effect(() => void log.push('dispose c.2'));
        throw new Error('boom');
      },
    };
    await expect(k.load(recorder(log, 'a', { provides: ['a'] }), recorder(log, 'b', { provides: ['b'], inject: ['a'] }), failing)).rejects.toMatchObject({
      code: 'KERNEL_START_FAILED',
      message: expect.stringContaining('component "c" failed to start: boom'),
    });
    expect(log).toEqual(['start a', 'start b', 'start c', 'dispose c.2', 'dispose c.1', 'dispose b', 'dispose a']);
    expect(k.state('c')).toBe('failed');
    expect(k.started).toEqual([]);
  });

  it('unloads exactly the dependents of a provider, newest first', async () => {
    const log: string[] = [];
    const k = new Kernel();
    await k.load(
      recorder(log, 'db', { provides: ['db'] }),
      recorder(log, 'http', { provides: ['http'] }),
      recorder(log, 'inbox', { provides: ['inbox'], inject: ['db'] }),
      recorder(log, 'dispatch', { inject: ['inbox'] }),
      recorder(log, 'web', { inject: ['http'] }),
    );
    log.length = 0;
    expect(await k.unload('db')).toEqual(['dispatch', 'inbox', 'db']);
    expect(log).toEqual(['dispose dispatch', 'dispose inbox', 'dispose db']);
    expect(k.started).toEqual(['http', 'web']);
  });

  it('stops in reverse start order, and a second stop does nothing', async () => {
    const log: string[] = [];
    const k = new Kernel();
    await k.load(recorder(log, 'a', { provides: ['a'] }), recorder(log, 'b', { inject: ['a'] }));
    log.length = 0;
    await k.stop();
    await k.stop();
    expect(log).toEqual(['dispose b', 'dispose a']);
    expect(k.state('a')).toBe('disposed');
  });

  it('keeps tearing down when a disposer throws, and reports it', async () => {
    const log: string[] = [];
    const failures: string[] = [];
    const k = new Kernel({ onDisposeError: (p, err) => failures.push(`${p}: ${(err as Error).message}`) });
    await k.load(recorder(log, 'a', { provides: ['a'] }), {
      name: 'b',
      inject: ['a'],
      start: (ctx) => {
        ctx.effect(() => {
          throw new Error('stuck');
        });
      },
    });
    log.length = 0;
    await k.stop();
    expect(failures).toEqual(['b: stuck']);
    expect(log).toEqual(['dispose a']);
  });

  it('an early-disposed effect does not run again at unload', async () => {
    let runs = 0;
    const k = new Kernel();
    let early!: () => Promise<void>;
    await k.load({ name: 'a', start: (ctx) => void (early = ctx.effect(() => void runs++)) });
    await early();
    await k.stop();
    expect(runs).toBe(1);
  });

  it('times out a start that never settles, naming the component', async () => {
    const k = new Kernel({ startTimeoutMs: 20 });
    await expect(k.load({ name: 'slow', start: () => new Promise(() => {}) })).rejects.toMatchObject({
      code: 'KERNEL_START_TIMEOUT',
      message: expect.stringContaining('component "slow" did not start within'),
    });
  });

  it('a component added later may inject services of running components', async () => {
    const k = new Kernel();
    await k.load({ name: 'a', provides: ['a'], start: (ctx) => ctx.provide('a', 42) });
    let seen: unknown;
    await k.load({ name: 'late', inject: ['a'], start: (ctx) => void (seen = ctx.use('a')) });
    expect(seen).toBe(42);
  });

  it('refuses use() of a service the component did not inject, and rolls back what it did', async () => {
    const k = new Kernel();
    const log: string[] = [];
    await k.load({ name: 'a', provides: ['a'], start: (ctx) => ctx.provide('a', 1) });
    const sneaky: Component = {
      name: 'sneaky',
      start: (ctx) => {
        ctx.effect(() => void log.push('disposed'));
        ctx.use('a');
      },
    };
    await expect(k.load(sneaky)).rejects.toMatchObject({
      code: 'KERNEL_START_FAILED',
      cause: { code: 'KERNEL_UNDECLARED_USE', message: expect.stringContaining('component "sneaky" uses "a" without injecting it') },
    });
    expect(log).toEqual(['disposed']);
    expect(k.state('sneaky')).toBe('failed');
  });

  it('refuses a component that provides the same service twice, keeping nothing of it', async () => {
    const k = new Kernel();
    await expect(k.load({ name: 'p', provides: ['x'], start: (ctx) => (ctx.provide('x', 1), ctx.provide('x', 2)) })).rejects.toMatchObject({
      code: 'KERNEL_START_FAILED',
      cause: { code: 'KERNEL_PROVIDED_TWICE', message: expect.stringContaining('component "p" provides "x" twice') },
    });
    expect(() => k.get('x')).toThrow(expect.objectContaining({ code: 'KERNEL_MISSING_SERVICE' }));
  });

  it('a component that declares a service but does not provide it fails its start and is rolled back', async () => {
    const k = new Kernel();
    const log: string[] = [];
    const lazy: Component = { name: 'lazy', provides: ['db', 'cache'], start: (ctx) => (ctx.effect(() => void log.push('disposed')), ctx.provide('db', 1)) };
    await expect(k.load(lazy)).rejects.toMatchObject({
      code: 'KERNEL_START_FAILED',
      cause: { code: 'KERNEL_MISSING_SERVICE', message: expect.stringContaining('component "lazy" declared but did not provide cache') },
    });
    expect(log).toEqual(['disposed']);
    expect(k.state('lazy')).toBe('failed');
    expect(() => k.get('db')).toThrow(expect.objectContaining({ code: 'KERNEL_MISSING_SERVICE' }));
  });

  it('refuses provide() of a service the component did not declare', async () => {
    const k = new Kernel();
    await expect(k.load({ name: 'p', start: (ctx) => ctx.provide('x', 1) })).rejects.toMatchObject({
      code: 'KERNEL_START_FAILED',
      cause: { code: 'KERNEL_UNDECLARED_PROVIDE', message: expect.stringContaining('component "p" provides "x" without declaring it') },
    });
  });
});
