import { afterEach, describe, expect, it, vi } from 'vitest';
import { BUSY_REPLY } from '../../../src/dispatch/dispatcher.js';
import { STOP_MARKER } from '../../../src/stream/reply-stream.js';
import { waitFor } from '../../helpers/daemon.js';
import { pipeline, type Pipeline } from '../../helpers/pipeline.js';
import { userMessage } from '../../helpers/recording-adapter.js';

const slow = `[agent]\nprovider = "echo"\necho_delay_ms = 40\n`;
const words = 'one two three four five six seven eight nine ten';

function states(p: Pipeline): string[] {
  return (p.db.prepare('SELECT state FROM inbox ORDER BY id').all() as { state: string }[]).map((r) => r.state);
}

describe('Dispatcher', () => {
  let p: Pipeline | undefined;
  afterEach(async () => {
    await p?.close();
    p = undefined;
    vi.useRealTimers();
  });

  it('the same message delivered twice gives one turn and one answer', async () => {
    p = pipeline(slow);
    const msg = userMessage('t', 'only once please');
    expect(await p.dispatcher.deliver(msg)).toBe(true);
    expect(await p.dispatcher.deliver({ ...msg })).toBe(true);
    await waitFor(() => states(p!).every((s) => s === 'done'));
    expect(p.adapter.visible('chat-1')).toEqual(['only once please']);
    expect(states(p)).toEqual(['done']);
    expect((await p.metrics.duplicates.get()).values[0]!.value).toBe(1);
  });

  it('/stop in one thread cancels that thread only, while another keeps streaming', async () => {
    p = pipeline(slow);
    const group = { chat: { id: 'g', type: 'group' as const } };
    await p.dispatcher.deliver(userMessage('t', words, { ...group, threadId: 'A' }));
    await p.dispatcher.deliver(userMessage('t', words, { ...group, threadId: 'B' }));
    await waitFor(() => p!.adapter.visible('g', 'A').length && p!.adapter.visible('g', 'B').length);
    await p.dispatcher.deliver(userMessage('t', '/stop', { ...group, threadId: 'A' }));
    await waitFor(() => p!.adapter.visible('g', 'B')[0] === words, 5000);
    const a = p.adapter.visible('g', 'A');
    expect(a[0]!.endsWith(STOP_MARKER)).toBe(true);
    expect(a[0]).not.toContain('ten');
    // One visible result: the stopped answer with its marker, no separate "Stopped." reply.
    expect(a).toHaveLength(1);
    expect(p.adapter.visible('g', 'B')).toEqual([words]);
  });

  it('/stop works on its fast path while max_in_flight is reached, and drops the queued turns of that scope only', async () => {
    p = pipeline(`${slow}\n[limits]\nmax_in_flight = 1\n`);
    await p.dispatcher.deliver(userMessage('t', words, { chat: { id: 'c1', type: 'dm' } }));
    await p.dispatcher.deliver(userMessage('t', 'queued in c1', { chat: { id: 'c1', type: 'dm' } }));
    await p.dispatcher.deliver(userMessage('t', 'queued in c2', { chat: { id: 'c2', type: 'dm' } }));
    await waitFor(() => p!.adapter.visible('c1').length);
    expect(p.dispatcher.snapshot()).toMatchObject({ inFlight: 1, queued: 2 });
    await p.dispatcher.deliver(userMessage('t', '/stop', { chat: { id: 'c1', type: 'dm' } }));
    await waitFor(() => p!.adapter.visible('c2')[0] === 'queued in c2');
    const c1 = p.adapter.visible('c1');
    expect(c1[0]!.endsWith(STOP_MARKER)).toBe(true);
    expect(c1).toHaveLength(1);
    expect(c1.join()).not.toContain('queued in c1');
    expect(states(p)).toEqual(['failed', 'failed', 'done', 'done']);
  });

  it('/stop with nothing running says so', async () => {
    p = pipeline(slow);
    await p.dispatcher.deliver(userMessage('t', '/stop'));
    await waitFor(() => p!.adapter.visible('chat-1').length);
    expect(p.adapter.visible('chat-1')).toEqual(['Nothing to stop.']);
  });

  it('a /stop right behind its message in the same batch still finds the turn to stop', async () => {
    p = pipeline(slow);
    const batch = [words, '/stop'].map((text) => p!.dispatcher.deliver(userMessage('t', text, { chat: { id: 'c', type: 'dm' } })));
    await Promise.all(batch);
    await waitFor(() => states(p!)[0] === 'failed' || states(p!)[0] === 'done', 5000);
    const shown = p.adapter.visible('c').join(' ');
    expect(shown).not.toContain('Nothing to stop');
    expect(shown).not.toContain('ten');
    // Stopped, not failed some other way: the inbox says cancelled and the chat shows the marker.
    expect(states(p)[0]).toBe('failed');
    expect(shown.endsWith(STOP_MARKER)).toBe(true);
  });

  it('past max_queued the sender gets one busy reply and the item is recorded as refused', async () => {
    p = pipeline(`${slow}\n[limits]\nmax_in_flight = 1\nmax_queued = 2\n`);
    for (const chat of ['a', 'b', 'c', 'd']) await p.dispatcher.deliver(userMessage('t', `hi ${chat}`, { chat: { id: chat, type: 'dm' } }));
    expect(p.adapter.visible('d')).toEqual([BUSY_REPLY]);
    // The first turn is running; it shows as "running" in the inbox once its first reply is out.
    expect(p.dispatcher.snapshot()).toMatchObject({ inFlight: 1, queued: 2 });
    await waitFor(() => states(p!)[0] === 'running');
    expect(states(p)).toEqual(['running', 'pending', 'pending', 'refused']);
    expect((await p.metrics.refused.get()).values[0]).toMatchObject({ value: 1, labels: { reason: 'busy' } });
    await waitFor(() => states(p!).filter((s) => s === 'done').length === 3, 5000);
  });

  it('followup answers in order, one turn at a time per conversation', async () => {
    p = pipeline(slow);
    for (const t of ['first message', 'second message', 'third message']) await p.dispatcher.deliver(userMessage('t', t));
    await waitFor(() => p!.adapter.visible('chat-1').length === 3 && states(p!).every((s) => s === 'done'), 5000);
    expect(p.adapter.visible('chat-1')).toEqual(['first message', 'second message', 'third message']);
  });

  it('interrupt cancels the running turn (keeping its text plus the marker) and runs only the newest', async () => {
    p = pipeline(slow, 'queue_mode = "interrupt"\n');
    await p.dispatcher.deliver(userMessage('t', words));
    await waitFor(() => p!.adapter.visible('chat-1').length);
    await p.dispatcher.deliver(userMessage('t', 'middle one'));
    await p.dispatcher.deliver(userMessage('t', 'newest one'));
    await waitFor(() => p!.adapter.visible('chat-1').includes('newest one'), 5000);
    const v = p.adapter.visible('chat-1');
    expect(v).toHaveLength(2);
    expect(v[0]!.endsWith(STOP_MARKER)).toBe(true);
    expect(v[1]).toBe('newest one');
  });

  it('collect merges messages that arrive during a turn into one next turn', async () => {
    p = pipeline(`${slow}\n[limits]\ncollect_debounce_ms = 50\n`, 'queue_mode = "collect"\n');
    await p.dispatcher.deliver(userMessage('t', 'one two three'));
    await p.dispatcher.deliver(userMessage('t', 'alpha'));
    await p.dispatcher.deliver(userMessage('t', 'beta'));
    await waitFor(() => p!.adapter.visible('chat-1').length === 2 && states(p!).every((s) => s === 'done'), 5000);
    expect(p.adapter.visible('chat-1')).toEqual(['one two three', 'alpha\n\nbeta']);
  });

  it('per-channel max_in_flight bounds running turns of that channel', async () => {
    p = pipeline(slow, 'max_in_flight = 1\n');
    await p.dispatcher.deliver(userMessage('t', words, { chat: { id: 'x', type: 'dm' } }));
    await p.dispatcher.deliver(userMessage('t', words, { chat: { id: 'y', type: 'dm' } }));
    expect(p.dispatcher.snapshot()).toMatchObject({ inFlight: 1, queued: 1 });
  });

  it('an agent max_in_flight bounds that agent across its conversations', async () => {
    p = pipeline(`[agent]\nprovider = "echo"\necho_delay_ms = 40\nmax_in_flight = 1\n`);
    await p.dispatcher.deliver(userMessage('t', words, { chat: { id: 'x', type: 'dm' } }));
    await p.dispatcher.deliver(userMessage('t', words, { chat: { id: 'y', type: 'dm' } }));
    expect(p.dispatcher.snapshot()).toMatchObject({ inFlight: 1, queued: 1 });
  });

  it('drops its own messages before the inbox, and other bots unless allow_bots', async () => {
    p = pipeline(slow);
    expect(await p.dispatcher.deliver(userMessage('t', 'echo of myself', { sender: { id: 'bot-self', name: 'me', isBot: true } }))).toBe(false);
    expect(await p.dispatcher.deliver(userMessage('t', 'another bot', { sender: { id: 'b2', name: 'b2', isBot: true } }))).toBe(false);
    expect(states(p)).toEqual([]);
    await p.close();
    p = pipeline(slow, 'allow_bots = true\n');
    expect(await p.dispatcher.deliver(userMessage('t', 'another bot', { sender: { id: 'b2', name: 'b2', isBot: true } }))).toBe(true);
  });

  it('senders outside allow_from get one notice an hour with their id, and reach nothing', async () => {
    vi.useFakeTimers({ now: new Date('2026-01-01T00:00:00Z'), toFake: ['Date'] });
    p = pipeline(slow, 'allow_from = ["friend"]\n');
    const stranger = { sender: { id: 'stranger-42', name: 'S', isBot: false } };
    await p.dispatcher.deliver(userMessage('t', 'hello?', stranger));
    await p.dispatcher.deliver(userMessage('t', 'hello??', stranger));
    expect(p.adapter.visible('chat-1')).toHaveLength(1);
    expect(p.adapter.visible('chat-1')[0]).toContain('stranger-42');
    vi.setSystemTime(new Date('2026-01-01T01:00:01Z'));
    await p.dispatcher.deliver(userMessage('t', 'hello???', stranger));
    expect(p.adapter.visible('chat-1')).toHaveLength(2);
    expect(states(p)).toEqual([]);
  });

  it('in groups, a stranger gets the notice only for a message that addresses the bot; their chatter is ignored', async () => {
    p = pipeline(slow, 'allow_from = ["friend"]\n');
    const group = { chat: { id: 'g', type: 'group' as const } };
    for (let i = 0; i < 5; i++) {
      const stranger = { sender: { id: `stranger-${i}`, name: 'S', isBot: false } };
      expect(await p.dispatcher.deliver(userMessage('t', `just chatting ${i}`, { ...group, ...stranger, addressed: false }))).toBe(false);
    }
    expect(p.adapter.visible('g')).toEqual([]);
    // A friend is answered as usual; a stranger who addresses the bot hears why not.
    await p.dispatcher.deliver(userMessage('t', '@bot hi', { ...group, addressed: true, sender: { id: 'friend', name: 'F', isBot: false } }));
    await waitFor(() => states(p!)[0] === 'done');
    expect(p.adapter.visible('g')).toEqual(['@bot hi']);
    await p.dispatcher.deliver(userMessage('t', '@bot let me in', { ...group, addressed: true, sender: { id: 'stranger-0', name: 'S', isBot: false } }));
    await waitFor(() => p!.adapter.visible('g').length === 2);
    expect(p.adapter.visible('g')[1]).toContain('stranger-0');
  });

  it('in groups, unaddressed messages are not answered but become context for the next addressed turn', async () => {
    p = pipeline(slow);
    let system = '';
    p.workspace.runtime.hooks.register({ phase: 'pre_execute', name: 'capture', run: (ctx) => void (system = ctx.input!.system) });
    const group = { chat: { id: 'g', type: 'group' as const } };
    await p.dispatcher.deliver(userMessage('t', 'the meeting moved to 3pm', { ...group, addressed: false, sender: { id: 'u2', name: 'Bob', isBot: false } }));
    expect(states(p)).toEqual([]);
    await p.dispatcher.deliver(userMessage('t', '@testbot when is it?', { ...group, addressed: true }));
    await waitFor(() => p!.adapter.visible('g').length && states(p!)[0] === 'done');
    expect(system).toContain('Bob: the meeting moved to 3pm');
    expect(p.adapter.visible('g')).toEqual(['@testbot when is it?']);
  });

  it('on start-up, pending and running items are dispatched again; running ones reuse their draft', async () => {
    p = pipeline(slow);
    const pending = userMessage('t', 'left pending', { chat: { id: 'p', type: 'dm' } });
    const running = userMessage('t', 'was running', { chat: { id: 'r', type: 'dm' } });
    p.inbox.add(pending, 't:p');
    const id = p.inbox.add(running, 't:r', 'running')!;
    const draft = await p.adapter.send({ channelId: 't', chatId: 'r', chatType: 'dm' }, 'was');
    p.inbox.setReplyRefs(id, [draft]);
    expect(p.dispatcher.recover()).toBe(2);
    await waitFor(() => states(p!).every((s) => s === 'done'), 5000);
    expect(p.adapter.visible('p')).toEqual(['left pending']);
    // One message in chat r: the old draft, now holding the whole answer.
    expect(p.adapter.visible('r')).toEqual(['was running']);
    expect(p.adapter.texts.get(draft.messageId)).toBe('was running');
  });
});

describe('Inbox pruning', () => {
  it('prunes finished items older than the retention, keeps the rest', async () => {
    const p = pipeline('');
    const old = p.inbox.add(userMessage('t', 'a'), 's')!;
    p.inbox.setState(old, 'done');
    p.inbox.add(userMessage('t', 'b'), 's');
    expect(p.inbox.prune(72, Date.now() + 73 * 3_600_000)).toBe(1);
    expect(p.inbox.unfinished()).toHaveLength(1);
    await p.close();
  });
});
