import { describe, expect, it } from 'vitest';
import { PassiveContext, NoticeLimiter } from '../../../src/dispatch/access.js';
import { waitFor } from '../../helpers/daemon.js';
import { withPipeline, type Pipeline } from '../../helpers/pipeline.js';
import { userMessage } from '../../helpers/recording-adapter.js';

const evictions = async (p: Pipeline, structure: string) => (await p.metrics.evictions.get()).values.find((v) => v.labels.structure === structure)?.value ?? 0;

describe('bounded memory keyed by user input', () => {
  let p: Pipeline | undefined;

  it('passive group context is bounded by [limits] passive_max_conversations, least recently active first, and evictions are counted', async () => {
    p = withPipeline('[limits]\npassive_max_conversations = 50\n');
    const text = 'x'.repeat(3000);
    for (let g = 0; g < 2000; g++) await p.dispatcher.deliver(userMessage('t', text, { chat: { id: `g${g}`, type: 'group' }, addressed: false }));
    expect(p.dispatcher.memory().passive.conversations).toBe(50);
    expect(await evictions(p, 'passive_context')).toBe(1950);
    // The newest groups kept their context.
    await p.dispatcher.deliver(userMessage('t', '@bot hi', { chat: { id: 'g1999', type: 'group' }, addressed: true }));
    expect(p.dispatcher.memory().passive.conversations).toBe(49);
  });

  it('passive group context is bounded by [limits] passive_max_bytes', async () => {
    p = withPipeline('[limits]\npassive_max_bytes = 100000\n');
    for (let g = 0; g < 500; g++) await p.dispatcher.deliver(userMessage('t', 'y'.repeat(3000), { chat: { id: `g${g}`, type: 'group' }, addressed: false }));
    expect(p.dispatcher.memory().passive.bytes).toBeLessThanOrEqual(100000);
    expect(p.dispatcher.memory().passive.conversations).toBeGreaterThan(10);
    expect(await evictions(p, 'passive_context')).toBeGreaterThan(400);
  });

  it('refused messages from distinct conversations leave no empty lanes behind', async () => {
    p = withPipeline('[agent]\nprovider = "echo"\necho_delay_ms = 200\n[limits]\nmax_in_flight = 1\nmax_queued = 2\n');
    for (let c = 0; c < 300; c++) await p.dispatcher.deliver(userMessage('t', 'one two three', { chat: { id: `c${c}`, type: 'dm' } }));
    // One running, two queued: three lanes, whatever number of conversations were refused.
    expect(p.dispatcher.memory().lanes).toBe(3);
    await waitFor(() => p!.dispatcher.memory().lanes === 0, 15_000);
  });

  it('a /stop that empties a lane forgets it', async () => {
    p = withPipeline('[agent]\nprovider = "echo"\necho_delay_ms = 100\n[limits]\nmax_in_flight = 1\n');
    await p.dispatcher.deliver(userMessage('t', 'one two three four', { chat: { id: 'a', type: 'dm' } }));
    await p.dispatcher.deliver(userMessage('t', 'queued', { chat: { id: 'b', type: 'dm' } }));
    await p.dispatcher.deliver(userMessage('t', '/stop', { chat: { id: 'b', type: 'dm' } }));
    expect(p.dispatcher.memory().lanes).toBe(1);
    await waitFor(() => p!.dispatcher.memory().lanes === 0, 10_000);
  });
});

describe('PassiveContext and NoticeLimiter', () => {
  it('a recently active conversation survives; an old one is evicted', () => {
    let evicted = 0;
    const ctx = new PassiveContext(
      20,
      () => ({ maxConversations: 2, maxBytes: 1e9 }),
      (n) => (evicted += n),
    );
    const msg = (text: string) => userMessage('t', text, { chat: { id: 'g', type: 'group' } });
    ctx.add('a', msg('a1'));
    ctx.add('b', msg('b1'));
    ctx.add('a', msg('a2'));
    ctx.add('c', msg('c1'));
    expect(ctx.take('b')).toEqual([]);
    expect(ctx.take('a').map((m) => m.text)).toEqual(['a1', 'a2']);
    expect(evicted).toBe(1);
    expect(ctx.size).toEqual({ conversations: 1, bytes: expect.any(Number) });
  });

  it('the not-allowed notice memory holds at most its bound', () => {
    let evicted = 0;
    const n = new NoticeLimiter(3_600_000, 100, (k) => (evicted += k));
    for (let i = 0; i < 1000; i++) n.take(`sender-${i}`);
    expect(n.size).toBe(100);
    expect(evicted).toBe(900);
    expect(n.take('sender-999')).toBe(false);
  });
});
