import { describe, expect, it } from 'vitest';
import type { Tool } from '../../../src/contracts/tools.js';
import { currentTimeTool } from '../../../src/runtime/tool-registry.js';
import { translatorMode } from '../../fixtures/modes/translator/index.js';
import { waitFor } from '../../helpers/daemon.js';
import { withPipeline, type Pipeline } from '../../helpers/pipeline.js';
import { userMessage } from '../../helpers/recording-adapter.js';

const agent = `[agent]\nprovider = "echo"\necho_delay_ms = 0\nmodel = "small"\nmodels = ["small", "large"]\n`;

/** Sends `text` in chat `chat` and resolves with the reply's final text. */
async function say(p: Pipeline, text: string, chat = 'c'): Promise<string> {
  const before = p.adapter.visible(chat).length;
  await p.dispatcher.deliver(userMessage('t', text, { chat: { id: chat, type: 'dm' } }));
  await waitFor(() => p.adapter.visible(chat).length > before && p.dispatcher.snapshot().inFlight === 0 && p.dispatcher.snapshot().queued === 0);
  return p.adapter.visible(chat).at(-1)!;
}

describe('built-in commands', () => {
  let p: Pipeline | undefined;

  it('/help lists every registered command, generated from the registry', async () => {
    p = withPipeline(agent);
    p.workspace.runtime.commands.register({ name: 'extra', help: 'a command added later', handler: () => '' });
    const help = await say(p, '/help');
    for (const c of p.workspace.runtime.commands.list()) expect(help).toContain(`/${c.name}`);
    expect(help).toContain('a command added later');
  });

  it('an echo-only agent does not read history it would never use', async () => {
    p = withPipeline(agent);
    let history: unknown[] | undefined;
    p.workspace.runtime.hooks.register({ phase: 'pre_execute', name: 'spy', run: (ctx) => void (history = ctx.input!.history) });
    await say(p, 'one');
    await say(p, 'two');
    expect(history).toEqual([]);
    expect(p.sessions.active('default', 't:c').turns).toBe(2);
  });

  it('/new starts a fresh session and keeps the old one', async () => {
    p = withPipeline(agent);
    await say(p, 'first words');
    const before = p.sessions.active('default', 't:c');
    expect(before.turns).toBe(1);
    expect(await say(p, '/new')).toBe('Started a new session.');
    const after = p.sessions.active('default', 't:c');
    expect(after.id).not.toBe(before.id);
    expect(after.turns).toBe(0);
    expect(p.sessions.recent(before.id)).toHaveLength(1);
  });

  it('/models and /model choose among the allowed models, per conversation', async () => {
    p = withPipeline(agent);
    expect(await say(p, '/models')).toBe('Models:\n• small\n  large');
    expect(await say(p, '/model huge')).toContain('"huge" is not allowed here');
    expect(await say(p, '/model large')).toBe('Model set to large.');
    let model: string | undefined;
    p.workspace.runtime.hooks.register({ phase: 'pre_execute', name: 'spy', run: (ctx) => void (model = ctx.input!.model) });
    await say(p, 'which model?');
    expect(model).toBe('large');
    await say(p, 'other chat', 'other');
    expect(model).toBeUndefined();
  });

  it('/queue sets the queue mode for this conversation, and dispatch follows it', async () => {
    p = withPipeline(agent);
    expect(await say(p, '/queue sideways')).toContain('Queue mode is followup');
    expect(await say(p, '/queue interrupt')).toBe('Queue mode set to interrupt.');
    expect(p.conversations.get('default', 't:c').queueMode).toBe('interrupt');
    expect(await say(p, '/status')).toContain('Queue mode: interrupt');
  });

  it('/config shows the effective settings without secrets, and changes only what a user may', async () => {
    p = withPipeline(
      `[agent]\nprovider = "openai-compatible"\nbase_url = "http://bob:hunter2@llm.example:8080/v1?key=sk-secret"\nmodel = "small"\nmodels = ["small", "large"]\nmax_steps = 3\nsystem_prompt = "internal instructions"\n`,
      '',
      { workspace: { apiKey: 'sk-live-key' } },
    );
    const shown = await say(p, '/config');
    expect(shown).toContain('agent: default (openai-compatible at llm.example:8080)');
    expect(shown).toContain('model: small (the default)');
    expect(shown).toContain('queue: followup (the default)');
    expect(shown).toContain('max_steps 3');
    for (const secret of ['hunter2', 'bob', 'sk-secret', 'sk-live-key', 'internal instructions']) expect(shown).not.toContain(secret);
    expect(await say(p, '/config queue interrupt')).toBe('Queue mode set to interrupt.');
    expect(p.conversations.get('default', 't:c').queueMode).toBe('interrupt');
    expect(await say(p, '/config queue sideways')).toContain('"sideways" is not a queue mode');
    expect(await say(p, '/config model huge')).toContain('"huge" is not allowed here');
    expect(await say(p, '/config model large')).toBe('Model set to large.');
    expect(await say(p, '/config max_steps 99')).toBe(
      '"max_steps" is set by the operator. You can change: queue (followup|interrupt|collect), model (one of /models).',
    );
    const after = await say(p, '/config');
    expect(after).toContain('model: large (chosen here)');
    expect(after).toContain('queue: interrupt (chosen here)');
    expect(after).toContain('max_steps 3');
  });

  it('/status describes the conversation', async () => {
    p = withPipeline(agent);
    await say(p, 'hello');
    const s = await say(p, '/status');
    expect(s).toContain('Agent: default (echo)');
    expect(s).toContain('Model: small');
    expect(s).toContain('Session: 1 turn(s)');
  });

  it('the current_time tool answers in the configured time zone, and is offered to the agent', async () => {
    const out = (await currentTimeTool.run({}, { signal: new AbortController().signal, scope: 's', timeZone: 'Asia/Tokyo' })) as {
      time_zone: string;
      local: string;
    };
    expect(out.time_zone).toBe('Asia/Tokyo');
    expect(out.local).toMatch(/\d{2}:\d{2}:\d{2}/);
    await expect(
      Promise.resolve().then(() => currentTimeTool.run({ time_zone: 'Mars/Olympus' }, { signal: new AbortController().signal, scope: 's', timeZone: 'UTC' })),
    ).rejects.toThrow(/unknown time zone/);
    p = withPipeline(agent);
    let tools: Tool[] = [];
    p.workspace.runtime.hooks.register({ phase: 'pre_execute', name: 'spy', run: (ctx) => void (tools = ctx.input!.tools ?? []) });
    await say(p, 'what time is it');
    expect(tools.map((t) => t.name)).toEqual(['current_time']);
  });

  it('a whole new mode from a test-only folder works without changing Runtime.run()', async () => {
    // Free-form slash text goes to the model on this channel, so an off mode's command reaches it.
    p = withPipeline(agent, 'unknown_commands = "agent"\n');
    p.workspace.runtime.modes.register(translatorMode);
    let seen: { system: string; tools: string[] } | undefined;
    p.workspace.runtime.hooks.register({
      phase: 'pre_execute',
      name: 'spy',
      priority: 0,
      run: (ctx) => void (seen = { system: ctx.input!.system, tools: (ctx.input!.tools ?? []).map((t) => t.name) }),
    });
    // Off: the command is unknown (goes to the agent), no tool, no prompt.
    expect(await say(p, '/pirate ahoy')).toBe('/pirate ahoy');
    expect(seen!.tools).toEqual(['current_time']);
    expect(seen!.system).not.toContain('pirate');
    expect(await say(p, '/mode translator')).toBe('Mode translator is on.');
    expect(await say(p, '/pirate ahoy')).toBe('Arr, ahoy!');
    await say(p, 'tell me a story');
    expect(seen!.tools).toEqual(['current_time', 'lookup_pirate_word']);
    expect(seen!.system).toContain('Answer like a pirate.');
    expect(await say(p, 'hello landlubber')).toBe('No landlubbers aboard.');
    expect(await say(p, '/help')).toContain('/pirate');
    expect(await say(p, '/mode translator')).toBe('Mode translator is off.');
    expect(await say(p, 'hello landlubber')).toBe('hello landlubber');
  });

  it('onCleanup: what hooks set up is released after the turn, newest first, even when the turn fails or a cleanup throws', async () => {
    p = withPipeline(agent);
    const log: string[] = [];
    p.workspace.runtime.hooks.register({
      phase: 'pre_agent_build',
      name: 'setup',
      run: (ctx) => {
        log.push(`setup ${ctx.message.text}`);
        ctx.onCleanup(() => void log.push('release first'));
        ctx.onCleanup(() => {
          throw new Error('cleanup failed');
        });
        ctx.onCleanup(async () => void log.push('release last'));
      },
    });
    p.workspace.runtime.hooks.register({
      phase: 'pre_execute',
      name: 'fail_on_boom',
      run: (ctx) => {
        if (ctx.message.text === 'boom') throw new Error('hook failed');
      },
    });
    await say(p, 'fine');
    expect(log).toEqual(['setup fine', 'release last', 'release first']);
    log.length = 0;
    await say(p, 'boom');
    expect(log).toEqual(['setup boom', 'release last', 'release first']);
  });

  it('the agent sees earlier turns of the session as history; commands are not remembered', async () => {
    // A fallback model that reads history makes the agent need it (echo alone does not).
    p = withPipeline(`${agent}base_url = "http://127.0.0.1:9/v1"\nfallback_models = ["openai-compatible:other"]\n`);
    let history: unknown[] = [];
    p.workspace.runtime.hooks.register({ phase: 'pre_execute', name: 'spy', run: (ctx) => void (history = ctx.input!.history) });
    await say(p, 'one');
    await say(p, '/status');
    await say(p, 'two');
    expect(history).toEqual([
      { role: 'user', content: 'one' },
      { role: 'assistant', content: 'one' },
    ]);
  });
});
