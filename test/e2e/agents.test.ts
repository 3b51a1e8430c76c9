import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { kinds } from '../helpers/kinds.js';
import type { ConfigError } from '../../src/contracts/errors.js';
import type { FakeLlm } from '../fakes/llm/server.js';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import { withChat, withDaemon, withLlm } from '../helpers/fixtures.js';

describe('agents and workspaces', () => {
  let llm: FakeLlm;
  let d: TestDaemon | undefined;
  beforeEach(async () => {
    llm = await withLlm();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  const agent = (name: string, model: string, prompt: string, extra = '') =>
    `[agents.${name}]\nprovider = "openai-compatible"\nbase_url = "${llm.url}"\nmodel = "${model}"\nsystem_prompt = "${prompt}"\n${extra}\n`;
  const web = (id: string, agentName: string) => `[[channels]]\nid = "${id}"\ntype = "webchat"\nagent = "${agentName}"\n`;
  const client = (id: string) => withChat(d!, `tab-${id}`, { path: `/chat/${id}` });

  it('two agents bound to two channels answer with their own system prompts and models', async () => {
    d = await withDaemon(
      agent('support', 'support-model', 'You are the support bot.') +
        agent('fun', 'fun-model', 'You are the fun bot.') +
        web('help', 'support') +
        web('play', 'fun'),
    );
    const help = await client('help');
    const play = await client('play');
    help.send('my order is late');
    await help.finals();
    play.send('tell me a joke');
    await play.finals();
    const byModel = Object.fromEntries(llm.requests.map((r) => [r.body.model, String(r.body.messages[0]!.content)]));
    expect(byModel['support-model']).toContain('You are the support bot.');
    expect(byModel['fun-model']).toContain('You are the fun bot.');
    expect(llm.requests.find((r) => r.body.model === 'support-model')!.body.messages.at(-1)!.content).toBe('my order is late');
  });

  it('an unbound channel with two agents, and an unknown binding, fail the config check', () => {
    const two = `[agents.a]\nprovider = "echo"\n[agents.b]\nprovider = "echo"\n`;
    const problems = (src: string) => {
      try {
        parseConfig(src, 'daemon.config.toml', kinds, {});
        return [];
      } catch (err) {
        return (err as ConfigError).problems;
      }
    };
    expect(problems(`${two}[[channels]]\nid = "w"\ntype = "webchat"\n`)[0]).toMatch(/channel "w" needs agent = one of a, b/);
    expect(problems(`${two}[[channels]]\nid = "w"\ntype = "webchat"\nagent = "c"\n`)[0]).toMatch(/bound to agent "c", which is not defined/);
    expect(problems(`${two}[agents.c]\nprovider = "echo"\nenabled = false\n[[channels]]\nid = "w"\ntype = "webchat"\nagent = "c"\n`)[0]).toMatch(
      /bound to agent "c", which is disabled/,
    );
  });

  it('an agent-only reload rebuilds that workspace and keeps every listener connected', async () => {
    const cfg = (prompt: string) =>
      agent('support', 'support-model', prompt) + agent('fun', 'fun-model', 'You are the fun bot.') + web('help', 'support') + web('play', 'fun');
    d = await withDaemon(cfg('Version one.'));
    const help = await client('help');
    const before = d.daemon.status().agents.map((a) => a.name);
    d.rewrite(cfg('Version two.'));
    const r = await d.daemon.reload();
    expect(r).toMatchObject({ ok: true, agents: ['support'], changed: [], added: [], removed: [] });
    expect(d.daemon.status().channels.map((c) => [c.id, c.connection])).toEqual([
      ['help', 1],
      ['play', 1],
    ]);
    expect(
      d.daemon
        .status()
        .agents.map((a) => a.name)
        .sort(),
    ).toEqual(before.sort());
    help.send('which version?');
    await help.finals();
    expect(String(llm.requests.at(-1)!.body.messages[0]!.content)).toContain('Version two.');
  });

  it('fails over to the next model before any text, cools the failing one down, and tries it again later', async () => {
    // Time is the subject: only the clock is faked (timers, sockets and the fake model stay
    // real), so the cooldown outlasts the second turn however slow the machine is, and ends
    // when the test moves the clock.
    vi.useFakeTimers({ toFake: ['Date'] });
    d = await withDaemon(agent('default', 'primary', 'p', 'fallback_models = ["openai-compatible:backup"]\ncooldown_ms = 60000') + web('w', 'default'));
    llm.scriptFor('primary', { kind: 'status', status: 500 });
    const c = await client('w');
    c.send('first turn');
    expect((await c.finals())[0]!.text).toBe('first turn');
    expect(llm.requests.map((r) => r.body.model)).toEqual(['primary', 'backup']);
    expect(d.daemon.status().agents[0]).toMatchObject({
      last_served: 'openai-compatible:backup',
      cooling: [{ model: 'openai-compatible:primary', failures: 1 }],
    });
    // The next turn skips the cooling model.
    c.send('second turn');
    await c.finals(2);
    expect(llm.requests.map((r) => r.body.model)).toEqual(['primary', 'backup', 'backup']);
    // After the cooldown the primary is tried again, and serves.
    vi.setSystemTime(Date.now() + 60_001);
    c.send('third turn');
    await c.finals(3);
    expect(llm.requests.at(-1)!.body.model).toBe('primary');
    expect(d.daemon.status().agents[0]).toMatchObject({ last_served: 'openai-compatible:primary', cooling: [] });
    const metrics = await (await fetch(`${d.url}/metrics`)).text();
    expect(metrics).toMatch(/channeld_model_turns_total\{agent="default",model="openai-compatible:backup"\} 2/);
    expect(metrics).toMatch(/channeld_model_failovers_total\{agent="default",model="openai-compatible:primary"\} 1/);
  });

  it('the task tracker lists running and queued turns with agent, channel, scope and model, and empties after them', async () => {
    d = await withDaemon(agent('default', 'slow-model', 'p') + web('w', 'default'));
    // The first answer waits for the test, so both turns are listed for as long as it looks.
    let releaseFirst!: () => void;
    const first = new Promise<void>((r) => (releaseFirst = r));
    llm.script({ kind: 'stream', chunks: [{ content: 'one ' }, { content: 'two', after: first }] }, { kind: 'stream', chunks: [{ content: 'three' }] });
    const c = await client('w');
    c.send('first');
    c.send('second');
    const list = await waitFor(() => {
      const l = d!.daemon.status().turns.list;
      return l.length === 2 && l[0]!.model ? l : undefined;
    });
    expect(list[0]).toMatchObject({ state: 'running', agent: 'default', channel: 'w', scope: 'w:tab-w', model: 'slow-model', started_at: expect.any(String) });
    expect(list[1]).toMatchObject({ state: 'queued', channel: 'w', started_at: null });
    releaseFirst();
    await c.finals(2);
    await waitFor(() => d!.daemon.status().turns.list.length === 0);
  });
});
