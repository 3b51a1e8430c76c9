import { afterEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import type { AgentInput } from '../../../src/contracts/agent-runner.js';
import { waitFor } from '../../helpers/daemon.js';
import { withPipeline, type Pipeline } from '../../helpers/pipeline.js';
import { userMessage } from '../../helpers/recording-adapter.js';

const agent = `[agent]\nprovider = "echo"\necho_delay_ms = 0\n`;
/** A fallback model that reads history makes the workspace load it (echo alone does not). */
const withHistory = `${agent}base_url = "http://127.0.0.1:9/v1"\nfallback_models = ["openai-compatible:other"]\n`;
const BRIEF = 'Keep answers brief';

async function say(p: Pipeline, text: string, chat = 'c'): Promise<string> {
  const before = p.adapter.visible(chat).length;
  await p.dispatcher.deliver(userMessage('t', text, { chat: { id: chat, type: 'dm' } }));
  await waitFor(() => p.adapter.visible(chat).length > before && p.dispatcher.snapshot().inFlight === 0 && p.dispatcher.snapshot().queued === 0);
  return p.adapter.visible(chat).at(-1)!;
}

/** Records what the agent is given each turn. */
function spy(p: Pipeline): AgentInput[] {
  const inputs: AgentInput[] = [];
  p.workspace.runtime.hooks.register({ phase: 'pre_execute', name: 'spy', run: (ctx) => void inputs.push(ctx.input!) });
  return inputs;
}

describe('built-in modes in the shipped workspace', () => {
  let p: Pipeline | undefined;
  afterEach(() => {
    vi.useRealTimers();
  });

  it('every workspace has them; /mode lists and switches them', async () => {
    p = withPipeline(agent);
    expect(p.workspace.runtime.modes.list().map((m) => m.name)).toEqual(['brief', 'incognito']);
    expect(await say(p, '/mode')).toBe('Modes: brief (off), incognito (off). Switch with /mode NAME.');
    const inputs = spy(p);
    await say(p, 'hello');
    expect(inputs.at(-1)!.system).not.toContain(BRIEF);
    expect(await say(p, '/mode brief')).toBe('Mode brief is on.');
    await say(p, 'hello');
    expect(inputs.at(-1)!.system).toContain(BRIEF);
    expect(await say(p, '/status')).toContain('Modes: brief');
  });

  it('[agent] modes turns a mode on by default; /mode turns it off for one conversation only', async () => {
    p = withPipeline(`${agent}modes = ["brief", "no_such_mode"]\n`);
    const inputs = spy(p);
    await say(p, 'hello', 'a');
    expect(inputs.at(-1)!.system).toContain(BRIEF);
    // A name no mode answers to turns nothing on, and /status does not claim it.
    expect(await say(p, '/status', 'a')).toContain('Modes: brief\n');
    expect(await say(p, '/mode brief', 'a')).toBe('Mode brief is off.');
    await say(p, 'hello', 'a');
    expect(inputs.at(-1)!.system).not.toContain(BRIEF);
    await say(p, 'hello', 'b');
    expect(inputs.at(-1)!.system).toContain(BRIEF);
  });

  it('incognito: the model sees no history and the turns are not stored; off again, the session goes on', async () => {
    p = withPipeline(withHistory);
    const inputs = spy(p);
    await say(p, 'remember me');
    expect(await say(p, '/mode incognito')).toBe('Mode incognito is on.');
    await say(p, 'a secret');
    expect(inputs.at(-1)!.history).toEqual([]);
    expect(p.sessions.active('default', 't:c').turns).toBe(1);
    await say(p, '/mode incognito');
    await say(p, 'back again');
    expect(inputs.at(-1)!.history).toEqual([
      { role: 'user', content: 'remember me' },
      { role: 'assistant', content: 'remember me' },
    ]);
    expect(p.sessions.active('default', 't:c').turns).toBe(2);
  });

  it('[agent] features reach the runtime: a tool that requires a listed feature is offered, others are not', async () => {
    p = withPipeline(`${agent}features = ["web"]\n`);
    const noop = { description: '', input: z.object({}), run: () => '' };
    p.workspace.runtime.tools.register({ name: 'fetch_page', requires_features: ['web'], ...noop });
    p.workspace.runtime.tools.register({ name: 'read_file', requires_features: ['files'], ...noop });
    const inputs = spy(p);
    await say(p, 'hello');
    expect((inputs.at(-1)!.tools ?? []).map((t) => t.name)).toEqual(['current_time', 'fetch_page']);
  });

  it("observeTurn is told the runtime's own time per turn, the agent's run excluded", async () => {
    const observed: Array<[string, number]> = [];
    p = withPipeline(agent, '', { workspace: { observeTurn: (outcome, s) => void observed.push([outcome, s]) } });
    // Only performance.now is faked: the agent's hook moves it on by 60 s while the agent "runs".
    vi.useFakeTimers({ toFake: ['performance'] });
    let movedMs = 0;
    p.workspace.runtime.hooks.register({
      phase: 'pre_execute',
      name: 'agent_clock',
      priority: 2_000_000,
      run: () => {
        const before = performance.now();
        vi.advanceTimersByTime(60_000);
        movedMs = performance.now() - before;
      },
    });
    await say(p, 'hello');
    expect(movedMs).toBe(60_000);
    await say(p, '/help');
    expect(observed.map(([o]) => o)).toEqual(['done', 'done']);
    expect(observed[0]![1]).toBeLessThan(60);
  });
});
