import { describe, expect, it } from 'vitest';
import { HookResult, type Phase } from '../../../src/contracts/hooks.js';
import { bareRuntime, request, sink } from '../../helpers/runtime.js';

const phases: Phase[] = ['pre_dispatch', 'post_dispatch', 'pre_agent_build', 'post_agent_build', 'pre_execute', 'post_response', 'on_error', 'finally'];

/**
 * What `short_circuit` and `skip_agent` skip, as docs/EXTENDING.md ("What short_circuit and
 * skip_agent skip") settles it (issue 38, A3 and A4): both end the phases before the agent,
 * including the rest of the phase they were returned in; post_response and finally run.
 */
describe('short_circuit and skip_agent', () => {
  function setup(phase: Phase, result: HookResult) {
    const { runtime, runner } = bareRuntime();
    const log: string[] = [];
    for (const p of phases) runtime.hooks.register({ phase: p, name: `rec_${p}`, priority: 50, run: () => void log.push(p) });
    // Set up before the deciding hook; its cleanup must still run.
    runtime.hooks.register({ phase, name: 'setup', priority: 0, run: (ctx) => ctx.onCleanup(() => void log.push('cleaned up')) });
    runtime.hooks.register({ phase, name: 'decide', priority: 10, run: () => result });
    // As the built-in `cleanup` hook does (src/runtime/builtin-hooks.ts).
    runtime.hooks.register({
      phase: 'finally',
      name: 'cleanup',
      priority: 0,
      run: async (ctx) => void (await Promise.all(ctx.takeCleanups().map((fn) => fn()))),
    });
    runtime.hooks.register({
      phase: 'post_response',
      name: 'observe',
      priority: 60,
      run: (ctx) => void log.push(`post_response saw "${ctx.text}", ${ctx.runner ? 'an agent' : 'no agent'}`),
    });
    return { runtime, runner, log };
  }

  it('short_circuit (A3): its reply is answered, then post_response sees it and finally cleans up', async () => {
    const { runtime, runner, log } = setup('pre_dispatch', HookResult.shortCircuit('not today'));
    const out = sink();
    expect(await runtime.run(request('/ping', out))).toMatchObject({ ending: 'done', text: 'not today' });
    expect(out.text()).toBe('not today');
    expect(runner.inputs).toHaveLength(0);
    // Not even the later hooks of its own phase, nor command dispatch (the text was a command).
    expect(log).toEqual(['post_response', 'post_response saw "not today", no agent', 'cleaned up', 'finally']);
  });

  it('skip_agent (A4): the rest of its phase and every later pre-execute phase are skipped, not only the agent', async () => {
    const { runtime, runner, log } = setup('post_dispatch', HookResult.skipAgent);
    const out = sink();
    expect(await runtime.run(request('hi', out))).toMatchObject({ ending: 'done', text: '' });
    expect(runner.inputs).toHaveLength(0);
    expect(log).toEqual(['pre_dispatch', 'post_response', 'post_response saw "", no agent', 'cleaned up', 'finally']);
  });
});
