import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CodedError } from '../../../src/contracts/errors.js';
import { HookResult, type Phase } from '../../../src/contracts/hooks.js';
import { ModeRegistry } from '../../../src/runtime/modes.js';
import { bareRuntime, request, ScriptedRunner, sink } from '../../helpers/runtime.js';

const order: Phase[] = ['pre_dispatch', 'post_dispatch', 'pre_agent_build', 'post_agent_build', 'pre_execute', 'post_response', 'on_error', 'finally'];

/** Registers a recording hook in every phase. */
function recordPhases(runtime: ReturnType<typeof bareRuntime>['runtime'], log: string[]): void {
  for (const phase of order) runtime.hooks.register({ phase, name: `rec_${phase}`, priority: 999, run: () => void log.push(phase) });
}

describe('Runtime.run', () => {
  it('runs the phases in order around the agent', async () => {
    const { runtime, runner } = bareRuntime();
    const log: string[] = [];
    recordPhases(runtime, log);
    const out = sink();
    expect(await runtime.run(request('hi', out))).toMatchObject({ ending: 'done', text: 'agent answer' });
    expect(log).toEqual(['pre_dispatch', 'post_dispatch', 'pre_agent_build', 'post_agent_build', 'pre_execute', 'post_response', 'finally']);
    expect(runner.inputs).toHaveLength(1);
    expect(out.text()).toBe('agent answer');
  });

  it('short_circuit ends the request with its reply; post_response and finally still run', async () => {
    const { runtime, runner } = bareRuntime();
    const log: string[] = [];
    recordPhases(runtime, log);
    runtime.hooks.register({ phase: 'post_dispatch', name: 'gate', run: () => HookResult.shortCircuit('not today') });
    const out = sink();
    await runtime.run(request('hi', out));
    expect(out.text()).toBe('not today');
    expect(runner.inputs).toHaveLength(0);
    expect(log).toEqual(['pre_dispatch', 'post_response', 'finally']);
  });

  it('skip_agent skips build and execute; post_response and finally still run', async () => {
    const { runtime, runner } = bareRuntime();
    const log: string[] = [];
    recordPhases(runtime, log);
    runtime.hooks.register({ phase: 'pre_agent_build', name: 'skip', priority: 0, run: (ctx) => (ctx.replyText('handled by a hook'), HookResult.skipAgent) });
    const out = sink();
    expect(await runtime.run(request('hi', out))).toMatchObject({ ending: 'done' });
    expect(runner.inputs).toHaveLength(0);
    expect(log).toEqual(['pre_dispatch', 'post_dispatch', 'post_response', 'finally']);
    expect(out.text()).toBe('handled by a hook');
  });

  it('a matched command ends the pre-agent phases: post_dispatch does not run, post_response and finally do', async () => {
    const { runtime, runner } = bareRuntime();
    const log: string[] = [];
    recordPhases(runtime, log);
    runtime.commands.register({ name: 'ping', help: 'pong', handler: () => 'pong' });
    const out = sink();
    expect(await runtime.run(request('/ping', out))).toMatchObject({ ending: 'done', command: 'ping' });
    expect(out.text()).toBe('pong');
    expect(runner.inputs).toHaveLength(0);
    expect(log).toEqual(['pre_dispatch', 'post_response', 'finally']);
  });

  it('continue (or returning nothing) goes on', async () => {
    const { runtime, runner } = bareRuntime();
    runtime.hooks.register({ phase: 'pre_execute', name: 'a', run: () => HookResult.continue });
    runtime.hooks.register({ phase: 'pre_execute', name: 'b', run: () => undefined });
    await runtime.run(request('hi'));
    expect(runner.inputs).toHaveLength(1);
  });

  it('a throwing hook goes to on_error; post_response and finally still run; the user reads a readable error', async () => {
    const { runtime } = bareRuntime();
    const log: string[] = [];
    recordPhases(runtime, log);
    runtime.hooks.register({
      phase: 'pre_execute',
      name: 'boom',
      run: () => {
        throw new CodedError('PROVIDER_TIMEOUT', 'upstream 504');
      },
    });
    runtime.hooks.register({ phase: 'on_error', name: 'explain', run: (ctx) => void (ctx.errorReply = `Sorry: ${(ctx.error as CodedError).code}`) });
    const out = sink();
    expect(await runtime.run(request('hi', out))).toMatchObject({ ending: 'error' });
    expect(log).toEqual(['pre_dispatch', 'post_dispatch', 'pre_agent_build', 'post_agent_build', 'on_error', 'post_response', 'finally']);
    expect(out.events.at(-1)).toEqual({ type: 'error', code: 'PROVIDER_TIMEOUT', message: 'Sorry: PROVIDER_TIMEOUT' });
  });

  it('on_error and finally hooks that throw are reported and the others still run', async () => {
    const { runtime, errors } = bareRuntime(
      new ScriptedRunner(() => {
        throw new Error('runner blew up');
      }),
    );
    const ran: string[] = [];
    runtime.hooks.register({
      phase: 'on_error',
      name: 'bad1',
      priority: 1,
      run: () => {
        throw new Error('x');
      },
    });
    runtime.hooks.register({ phase: 'on_error', name: 'good1', priority: 2, run: () => void ran.push('good1') });
    runtime.hooks.register({
      phase: 'finally',
      name: 'bad2',
      priority: 1,
      run: () => {
        throw new Error('y');
      },
    });
    runtime.hooks.register({ phase: 'finally', name: 'good2', priority: 2, run: () => void ran.push('good2') });
    expect(await runtime.run(request('hi'))).toMatchObject({ ending: 'error' });
    expect(ran).toEqual(['good1', 'good2']);
    expect(errors).toEqual(['on_error:bad1', 'finally:bad2']);
  });

  it('a cancelled turn ends as cancelled, not as an error', async () => {
    const ac = new AbortController();
    const { runtime } = bareRuntime(
      new ScriptedRunner(() => {
        ac.abort();
        throw new Error('aborted');
      }),
    );
    expect(await runtime.run(request('hi', sink(), { signal: ac.signal }))).toMatchObject({ ending: 'cancelled' });
  });

  it('mode-gated hooks, commands and contributors run only while the mode is active', async () => {
    let active = new Set<string>();
    const { runtime, runner } = bareRuntime(undefined, { modesOf: () => active });
    const ran: string[] = [];
    runtime.hooks.register({ phase: 'pre_execute', name: 'gated', mode: 'focus', run: () => void ran.push('gated') });
    runtime.commands.register({ name: 'focus', mode: 'focus', help: 'x', handler: () => 'focused' });
    runtime.prompt.register({ name: 'focus_prompt', mode: 'focus', contribute: () => 'Stay focused.' });
    const refused = sink();
    await runtime.run(request('/focus', refused));
    expect(refused.text()).toBe('Unknown command /focus, see /help.'); // the default for a command that is not there
    expect(runner.inputs).toEqual([]);
    const off = sink();
    await runtime.run(request('/focus', off, { unknownCommands: 'agent' }));
    expect(ran).toEqual([]);
    expect(off.text()).toBe('agent answer'); // unknown command, passed on → the agent
    expect(runner.inputs[0]!.system).not.toContain('Stay focused.');
    active = new Set(['focus']);
    const on = sink();
    await runtime.run(request('/focus', on));
    expect(on.text()).toBe('focused');
    await runtime.run(request('hello'));
    expect(ran).toEqual(['gated']);
    expect(runner.inputs.at(-1)!.system).toContain('Stay focused.');
  });

  it('a prompt contributor that throws is reported and skipped', async () => {
    const { runtime, runner, errors } = bareRuntime();
    runtime.prompt.register({ name: 'first', priority: 1, contribute: () => 'First.' });
    runtime.prompt.register({
      name: 'broken',
      priority: 2,
      contribute: () => {
        throw new Error('nope');
      },
    });
    runtime.prompt.register({ name: 'last', priority: 3, contribute: () => 'Last.' });
    await runtime.run(request('hi'));
    expect(runner.inputs[0]!.system).toBe('First.\n\nLast.');
    expect(errors).toEqual(['pre_agent_build:prompt:broken']);
  });

  it('/cmd@otherbot is not ours and goes to the agent as text; /cmd@mybot is ours', async () => {
    const { runtime, runner } = bareRuntime();
    runtime.commands.register({ name: 'ping', help: 'pong', handler: () => 'pong' });
    const theirs = sink();
    await runtime.run(request('/ping@otherbot', theirs));
    expect(theirs.text()).toBe('agent answer');
    expect(runner.inputs[0]!.text).toBe('/ping@otherbot');
    const ours = sink();
    await runtime.run(request('/ping@MyBot', ours));
    expect(ours.text()).toBe('pong');
  });

  it('refuses two modes with one name', () => {
    const { runtime } = bareRuntime();
    const modes = new ModeRegistry(runtime);
    modes.register({ name: 'm', description: '', setup: () => {} });
    expect(() => modes.register({ name: 'm', description: '', setup: () => {} })).toThrow(
      expect.objectContaining({ code: 'MODE_DUPLICATE', message: expect.stringMatching(/mode "m" is already registered/) }),
    );
  });

  it('requires_modes means any of the listed modes; requires_features means all of the workspace features', async () => {
    let active = new Set<string>();
    const { runtime, runner } = bareRuntime(undefined, { modesOf: () => active, features: new Set(['web']) });
    const noop = { description: '', input: z.object({}), run: () => '' };
    runtime.tools.register({ name: 'shared', requires_modes: ['research', 'deep'], ...noop });
    runtime.tools.register({ name: 'fetch', requires_features: ['web'], ...noop });
    runtime.tools.register({ name: 'fetch_files', requires_features: ['web', 'files'], ...noop });
    const offered = async () => (await runtime.run(request('hi')), (runner.inputs.at(-1)!.tools ?? []).map((t) => t.name));
    expect(await offered()).toEqual(['fetch']);
    active = new Set(['deep']);
    expect(await offered()).toEqual(['shared', 'fetch']);
    active = new Set(['research', 'deep']);
    expect(await offered()).toEqual(['shared', 'fetch']);
  });

  it("a mode's tool is offered while its mode, or another mode it names, is on", async () => {
    let active = new Set<string>();
    const { runtime, runner } = bareRuntime(undefined, { modesOf: () => active });
    runtime.modes.register({
      name: 'research',
      description: '',
      setup: (api) => api.tool({ name: 'search', description: '', input: z.object({}), requires_modes: ['deep'], run: () => '' }),
    });
    const offered = async () => (await runtime.run(request('hi')), (runner.inputs.at(-1)!.tools ?? []).map((t) => t.name));
    expect(await offered()).toEqual([]);
    active = new Set(['research']);
    expect(await offered()).toEqual(['search']);
    active = new Set(['deep']);
    expect(await offered()).toEqual(['search']);
  });

  it('two tools with one name are refused with their own code', () => {
    const { runtime } = bareRuntime();
    const t = { name: 'x', description: '', input: z.object({}), run: () => '' };
    runtime.tools.register(t);
    expect(() => runtime.tools.register(t)).toThrow(expect.objectContaining({ code: 'TOOL_DUPLICATE' }));
    runtime.commands.register({ name: 'x', help: '', handler: () => '' });
    expect(() => runtime.commands.register({ name: 'x', help: '', handler: () => '' })).toThrow(expect.objectContaining({ code: 'COMMAND_DUPLICATE' }));
  });

  it('a runner that stops without an ending ends the turn in its own error, with its own text', async () => {
    const { runtime } = bareRuntime(new ScriptedRunner([{ type: 'text_delta', text: 'half' }]));
    const out = sink();
    expect(await runtime.run(request('hi', out))).toMatchObject({ ending: 'error', errorCode: 'AGENT_NO_ENDING' });
    expect(out.events.at(-1)).toEqual({ type: 'error', code: 'AGENT_NO_ENDING', message: 'The agent ended without an answer.' });
  });

  it('offers each tool bounded and wrapped once, not once per turn; a new result bound makes them anew, and the bound and the wrap still apply', async () => {
    let max = 10;
    let wraps = 0;
    const { runtime, runner } = bareRuntime(undefined, {
      maxToolResultChars: () => max,
      wrapTool: (t) => {
        wraps++;
        return { ...t, description: `wrapped: ${t.description}` };
      },
    });
    runtime.tools.register({ name: 'long', description: 'answers at length', input: z.object({}), run: () => 'x'.repeat(100) });
    for (let i = 0; i < 3; i++) await runtime.run(request(`turn ${i}`));
    const [a, b, c] = runner.inputs.map((input) => input.tools?.find((t) => t.name === 'long'));
    expect(a).toBeDefined();
    expect(b).toBe(a);
    expect(c).toBe(a);
    expect(wraps).toBe(1);
    expect(a!.description.startsWith('wrapped: answers at')).toBe(true);
    const cut = String(await a!.run({}, {} as never));
    expect(cut).not.toBe('x'.repeat(100));
    max = 50;
    await runtime.run(request('after a reload'));
    const d = runner.inputs[3]!.tools!.find((t) => t.name === 'long')!;
    expect(d).not.toBe(a);
    expect(wraps).toBe(2);
    expect(String(await d.run({}, {} as never)).length).toBeGreaterThan(cut.length);
  });
});
