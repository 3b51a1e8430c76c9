import { describe, expect, it } from 'vitest';
import { HookResult, type Phase } from '../../../src/contracts/hooks.js';
import { bareRuntime, request, sink } from '../../helpers/runtime.js';

/**
 * A phase runs synchronously until a hook returns a promise, and only then waits (the
 * runtime's hot path). What must not change: the order, the short circuit after an awaited
 * hook, and on_error and finally running every hook whether one throws or rejects.
 */
const tick = () => new Promise<void>((r) => setImmediate(r));

describe('phases with synchronous and asynchronous hooks', () => {
  it('runs them in order, waiting only for the ones that return a promise', async () => {
    const { runtime } = bareRuntime();
    const log: string[] = [];
    const add = (phase: Phase, name: string, priority: number, wait: boolean) =>
      runtime.hooks.register({
        phase,
        name,
        priority,
        run: () => {
          log.push(`${name} start`);
          if (!wait) return void log.push(`${name} end`);
          return tick().then(() => void log.push(`${name} end`));
        },
      });
    add('pre_dispatch', 'a', 1, false);
    add('pre_dispatch', 'b', 2, true);
    add('pre_dispatch', 'c', 3, false);
    add('post_response', 'd', 1, true);
    add('post_response', 'e', 2, false);
    add('finally', 'f', 1, true);
    add('finally', 'g', 2, false);
    await runtime.run(request('hi', sink()));
    expect(log).toEqual(['a', 'b', 'c', 'd', 'e', 'f', 'g'].flatMap((n) => [`${n} start`, `${n} end`]));
  });

  it('a short circuit after an awaited hook still ends the pre-agent phases', async () => {
    const { runtime, runner } = bareRuntime();
    runtime.hooks.register({ phase: 'post_dispatch', name: 'slow', priority: 1, run: () => tick() });
    runtime.hooks.register({ phase: 'post_dispatch', name: 'gate', priority: 2, run: async () => HookResult.shortCircuit('later, then no') });
    let after = false;
    runtime.hooks.register({ phase: 'post_dispatch', name: 'after', priority: 3, run: () => void (after = true) });
    const out = sink();
    await runtime.run(request('hi', out));
    expect(out.text()).toBe('later, then no');
    expect(after).toBe(false);
    expect(runner.inputs).toHaveLength(0);
  });

  it('a hook that throws synchronously fails the turn as one that rejects does', async () => {
    for (const run of [
      () => {
        throw new Error('sync boom');
      },
      () => Promise.reject(new Error('async boom')),
    ]) {
      const { runtime } = bareRuntime();
      runtime.hooks.register({ phase: 'pre_execute', name: 'boom', run });
      const out = await runtime.run(request('hi', sink()));
      expect(out.ending).toBe('error');
    }
  });

  it('finally runs every hook after one throws and after one rejects, and reports both', async () => {
    const { runtime, errors } = bareRuntime();
    const ran: string[] = [];
    runtime.hooks.register({
      phase: 'finally',
      name: 'throws',
      priority: 1,
      run: () => {
        throw new Error('x');
      },
    });
    runtime.hooks.register({ phase: 'finally', name: 'rejects', priority: 2, run: () => tick().then(() => Promise.reject(new Error('y'))) });
    runtime.hooks.register({ phase: 'finally', name: 'last', priority: 3, run: () => void ran.push('last') });
    await runtime.run(request('hi', sink()));
    expect(errors).toEqual(['finally:throws', 'finally:rejects']);
    expect(ran).toEqual(['last']);
  });

  it('the system prompt keeps its contributors in order, sync or async, and skips one that fails either way', async () => {
    const { runtime, runner } = bareRuntime();
    runtime.prompt.register({ name: 'a', priority: 1, contribute: () => 'one' });
    runtime.prompt.register({ name: 'b', priority: 2, contribute: async () => 'two' });
    runtime.prompt.register({ name: 'c', priority: 3, contribute: () => Promise.reject(new Error('no')) });
    runtime.prompt.register({
      name: 'd',
      priority: 4,
      contribute: () => {
        throw new Error('no');
      },
    });
    runtime.prompt.register({ name: 'e', priority: 5, contribute: () => 'three' });
    await runtime.run(request('hi', sink()));
    expect(runner.inputs[0]!.system).toBe('one\n\ntwo\n\nthree');
  });
});
