import { afterEach, describe, expect, it } from 'vitest';
import { startDaemon, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { ChatClient } from '../helpers/webchat-client.js';

describe('chat commands and the per-turn log line', () => {
  let d: TestDaemon | undefined;
  const clients: ChatClient[] = [];
  afterEach(async () => {
    for (const c of clients.splice(0)) c.close();
    await d?.stop();
    d = undefined;
  });
  const body = (extra = '') => `[agent]\nprovider = "echo"\necho_delay_ms = 0\n\n[[channels]]\nid = "web"\ntype = "webchat"\n${extra}`;
  const chat = async () => {
    const c = new ChatClient(d!.url, `tab-${clients.length}`);
    clients.push(c);
    await c.opened;
    return c;
  };
  const ask = async (c: ChatClient, text: string) => {
    const before = new Set(c.replies().map((f) => f.ref));
    c.send(text);
    const finals = await c.finals(before.size + 1);
    return finals.find((f) => !before.has(f.ref))!.text!;
  };

  it('/queue with a bad value names the valid ones', async () => {
    d = await startDaemon(body());
    const c = await chat();
    const reply = await ask(c, '/queue bogus');
    expect(reply).toContain('"bogus" is not a queue mode; the valid values are followup, interrupt, collect');
    expect(reply).toContain('Queue mode is followup');
    expect(await ask(c, '/queue collect')).toBe('Queue mode set to collect.');
  });

  it('an unknown /command gets "unknown command, see /help" instead of the model; unknown_commands = "agent" passes it on', async () => {
    d = await startDaemon(body());
    const c = await chat();
    expect(await ask(c, '/frobnicate now')).toBe('Unknown command /frobnicate, see /help.');
    await d.stop();
    d = await startDaemon(body('unknown_commands = "agent"\n'));
    const free = await chat();
    expect(await ask(free, '/frobnicate now')).toBe('/frobnicate now');
  });

  it('/turns lists what waits in the conversation, not the turn asking', async () => {
    d = await startDaemon(body());
    const c = await chat();
    expect(await ask(c, '/turns')).toBe('no turns');
  });

  it('logs one info line per finished turn with channel, conversation, agent, model, duration, outcome and tokens', async () => {
    d = await startDaemon(body());
    const c = await chat();
    await ask(c, 'hello there');
    const line = await waitFor(() => d!.logs.lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'turn finished'));
    expect(line).toMatchObject({ level: 30, channel: 'web', conversation: 'web:tab-0', agent: 'default', model: 'echo', outcome: 'done', duration_ms: expect.any(Number), tokens_in: expect.any(Number), tokens_out: expect.any(Number) });
    expect(line.tokens_out).toBeGreaterThan(0);
  });
});
