import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { agentSchema } from '../../../src/config/schema.js';
import { BACKGROUND_REPLY, type Tool, type ToolContext } from '../../../src/contracts/tools.js';
import type { ChannelMessage, MessageRef } from '../../../src/contracts/message.js';
import { createLogger } from '../../../src/observe/logger.js';
import { ApprovalStore } from '../../../src/store/approvals.js';
import { openDb } from '../../../src/store/db.js';
import { ApprovalCoordinator } from '../../../src/tools/approvals.js';
import { ToolCalls } from '../../../src/tools/tool-calls.js';
import { LogSink, waitFor } from '../../helpers/daemon.js';

const message: ChannelMessage = {
  channelId: 'web',
  kind: 'webchat',
  messageId: 'm1',
  chat: { id: 'tab', type: 'dm' },
  sender: { id: 'ada', name: 'Ada', isBot: false },
  text: 'go',
  attachments: [],
  addressed: true,
  receivedAt: 0,
};
const ctx = (index: number): ToolContext => ({
  signal: new AbortController().signal,
  scope: 'web:tab',
  timeZone: 'UTC',
  message,
  position: { step: 0, index },
});

/** ToolCalls for agent "default" with these `[agent]` keys; follow-ups are collected, not stored. */
function calls(keys: Record<string, unknown>) {
  const sink = new LogSink();
  const cfg = agentSchema.parse(keys);
  const c = new ToolCalls({ log: createLogger({ level: 'info', destination: sink }), agent: () => cfg });
  const delivered: ChannelMessage[] = [];
  c.deliver = async (m) => {
    delivered.push(m);
    return true;
  };
  return { c, sink, delivered };
}

/** A tool each call of which waits until the test releases its `id`. */
function waiting() {
  const release = new Map<string, (v: string) => void>();
  const t: Tool<{ id: string }> = {
    name: 'wait',
    description: 'waits',
    input: z.object({ id: z.string() }),
    run: ({ id }) => new Promise<string>((resolve) => release.set(id, resolve)),
  };
  return { t, release: (id: string) => release.get(id)!(`done ${id}`), started: (id: string) => release.has(id) };
}

describe('ToolCalls: background calls', () => {
  it('a call past background_after_ms goes on in the background up to max_background_calls; its result comes back as one follow-up message', async () => {
    const { c, sink, delivered } = calls({ background_after_ms: 20, max_background_calls: 1 });
    const w = waiting();
    const tool = c.wrap('default', w.t);
    expect(await tool.run({ id: 'a' }, ctx(0))).toEqual(BACKGROUND_REPLY);
    expect(c.backgroundIn('web:tab')).toBe(1);
    expect(c.running.cancel('web:elsewhere')).toBe(0);

    // The one slot is taken: the next long call keeps its turn waiting for its result.
    const second = tool.run({ id: 'b' }, ctx(1)) as Promise<unknown>;
    await waitFor(() => sink.text.includes('no background slot free'));
    w.release('b');
    expect(await second).toBe('done b');
    expect(delivered).toEqual([]);

    w.release('a');
    await waitFor(() => delivered.length === 1);
    expect(delivered[0]).toMatchObject({
      channelId: 'web',
      chat: { id: 'tab', type: 'dm' },
      sender: { id: 'ada' },
      addressed: true,
      text: '[Background tool call finished] wait returned:\ndone a',
      synthetic: { kind: 'tool_result', agent: 'default' },
    });
    // Keyed by the call, so a second offer of the same result is the same inbox item.
    expect(delivered[0]!.messageId).toMatch(/^tool-result:[0-9a-f]{64}$/);
    expect(c.backgroundIn('web:tab')).toBe(0);
  });

  it('/stop tool (cancel) ends a call with "cancelled by the user" at once, even one whose tool ignores its signal', async () => {
    const { c, delivered } = calls({});
    const w = waiting();
    const run = c.wrap('default', w.t).run({ id: 'a' }, ctx(0)) as Promise<unknown>;
    await waitFor(() => w.started('a'));
    // The tool ignores its signal, as a careless plugin might: the model still hears at once.
    expect(c.running.cancel('web:tab')).toBe(1);
    expect(await run).toEqual({ error: 'cancelled by the user' });
    w.release('a');
    expect(c.running.cancel('web:tab')).toBe(0);
    expect(delivered).toEqual([]);
  });
});

describe('ToolCalls: approval of a plugin tool across a restart (the same SQLite database)', () => {
  it('a finished call is not run again when its turn is re-run; the stored result is given', async () => {
    const db = openDb(':memory:');
    let runs = 0;
    const count: Tool = { name: 'count', description: 'counts', input: z.object({}), run: () => `ran ${++runs}` };
    const posts: string[] = [];
    const coordinator = () =>
      new ApprovalCoordinator({
        store: new ApprovalStore(db),
        log: createLogger({ level: 'error', destination: new LogSink() }),
        policy: () => ({ approvers: [], timeoutMs: 60_000 }),
        send: async (_t, text) => {
          posts.push(text);
          return { chatId: 'tab', messageId: `q${posts.length}` } satisfies MessageRef;
        },
        edit: async () => {},
      });
    const first = calls({ tool_approval: ['count'] });
    const a = coordinator();
    first.c.gate = a;
    const run = first.c.wrap('default', count).run({}, ctx(0)) as Promise<unknown>;
    await waitFor(() => posts.length === 1);
    expect(runs).toBe(0);
    await a.decide(message, 'web:tab', 'approve', /\/approve ([0-9a-f]{6})/.exec(posts[0]!)![1]!);
    expect(await run).toBe('ran 1');

    // A new process on the same database re-runs the turn: no question, no second run.
    const second = calls({ tool_approval: ['count'] });
    second.c.gate = coordinator();
    await waitFor(async () => (await second.c.wrap('default', count).run({}, ctx(0))) === 'ran 1');
    expect(runs).toBe(1);
    expect(posts).toHaveLength(1);
  });
});
