import { beforeEach, describe, expect, it } from 'vitest';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import { withChat, withDaemon } from '../helpers/fixtures.js';
import { echoAgent, webchatChannel } from '../helpers/toml.js';
import type { ChatClient } from '../helpers/webchat-client.js';

describe('chat commands and the per-turn log line', () => {
  let d: TestDaemon | undefined;
  let tabs = 0;
  beforeEach(() => {
    tabs = 0;
  });
  const body = (extra = '') => echoAgent(0) + webchatChannel('web', extra);
  const chat = () => withChat(d!, `tab-${tabs++}`);
  const ask = async (c: ChatClient, text: string) => {
    const before = new Set(c.replies().map((f) => f.ref));
    c.send(text);
    const finals = await c.finals(before.size + 1);
    return finals.find((f) => !before.has(f.ref))!.text!;
  };

  it('/queue with a bad value names the valid ones', async () => {
    d = await withDaemon(body());
    const c = await chat();
    const reply = await ask(c, '/queue bogus');
    expect(reply).toContain('"bogus" is not a queue mode; the valid values are followup, interrupt, collect');
    expect(reply).toContain('Queue mode is followup');
    expect(await ask(c, '/queue collect')).toBe('Queue mode set to collect.');
  });

  it('an unknown /command gets "unknown command, see /help" instead of the model; unknown_commands = "agent" passes it on', async () => {
    d = await withDaemon(body());
    const c = await chat();
    expect(await ask(c, '/frobnicate now')).toBe('Unknown command /frobnicate, see /help.');
    await d.stop();
    d = await withDaemon(body('unknown_commands = "agent"\n'));
    const free = await chat();
    expect(await ask(free, '/frobnicate now')).toBe('/frobnicate now');
  });

  it('/turns lists what waits in the conversation, not the turn asking', async () => {
    d = await withDaemon(body());
    const c = await chat();
    expect(await ask(c, '/turns')).toBe('no turns');
  });

  it('logs one info line per finished turn with channel, conversation, agent, model, duration, outcome and tokens', async () => {
    d = await withDaemon(body());
    const c = await chat();
    await ask(c, 'hello there');
    const line = await waitFor(() => d!.logs.lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'turn finished'));
    expect(line).toMatchObject({
      level: 30,
      channel: 'web',
      conversation: 'web:tab-0',
      agent: 'default',
      model: 'echo',
      outcome: 'done',
      duration_ms: expect.any(Number),
      tokens_in: expect.any(Number),
      tokens_out: expect.any(Number),
    });
    expect(line.tokens_out).toBeGreaterThan(0);
  });
});
