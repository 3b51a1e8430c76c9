import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { getEventListeners } from 'node:events';
import type { NativeStream } from '../../../src/contracts/channel.js';
import { ChannelError } from '../../../src/contracts/errors.js';
import { FirstVisibleFirst } from '../../../src/stream/first-visible.js';
import { ReplyStream, STOP_MARKER, type ReplyStreamOptions } from '../../../src/stream/reply-stream.js';
import { openFenceAt } from '../../../src/util/chunk.js';
import { linkedTo } from '../../../src/util/linked-abort.js';
import { RecordingAdapter } from '../../helpers/recording-adapter.js';

const target = { channelId: 't', chatId: 'c', chatType: 'dm' as const };
const usage = { inputTokens: 0, outputTokens: 0, estimated: true };

function stream(adapter: RecordingAdapter, over: Partial<ReplyStreamOptions> = {}) {
  return new ReplyStream({
    transport: adapter,
    capabilities: adapter.capabilities,
    target,
    streamMode: 'partial',
    showToolProgress: true,
    finalDeadlineMs: 60_000,
    ...over,
    signal: over.signal ?? new AbortController().signal,
  });
}

/** Feeds `text` word by word, `everyMs` apart, under fake timers. */
async function feed(s: ReplyStream, text: string, everyMs: number): Promise<void> {
  for (const w of text.match(/\S+\s*/g) ?? []) {
    s.push({ type: 'text_delta', text: w });
    await vi.advanceTimersByTimeAsync(everyMs);
  }
}

const requests = (a: RecordingAdapter) => a.calls.filter((c) => c.op !== 'typing');

/**
 * A reply showing 'one ' after `shownMs` and another whose first message is held in flight,
 * both on `gate`; then the first gets 'two' to draft, which waits for the other's message.
 */
async function visibleWhileAnotherWaits(gate: FirstVisibleFirst, shownMs: number, over: Partial<ReplyStreamOptions> = {}) {
  const a = new RecordingAdapter('t', { minEditIntervalMs: 1000 });
  const shown = stream(a, { firstVisible: gate, ...over });
  shown.push({ type: 'text_delta', text: 'one ' });
  await vi.advanceTimersByTimeAsync(shownMs);
  const { held, other } = await firstMessageHeld(gate);
  shown.push({ type: 'text_delta', text: 'two' });
  return { a, shown, held, other };
}

/** A reply on `gate` with text whose first message the platform holds in flight. */
async function firstMessageHeld(gate: FirstVisibleFirst) {
  const b = new RecordingAdapter('t');
  const held = b.hold((c) => c.op === 'send');
  const other = stream(b, { firstVisible: gate });
  other.push({ type: 'text_delta', text: 'first' });
  await held.reached;
  return { held, other };
}

describe('ReplyStream', () => {
  beforeEach(() => vi.useFakeTimers({ now: 0 }));
  afterEach(() => vi.useRealTimers());

  it('edits at least minEditIntervalMs apart, each edit carrying the newest full text', async () => {
    const a = new RecordingAdapter('t', { minEditIntervalMs: 1000 });
    const s = stream(a);
    const words = Array.from({ length: 100 }, (_, i) => `w${i}`).join(' ');
    await feed(s, words, 50); // 20 words a second for 5 s
    s.push({ type: 'done', usage });
    await vi.runAllTimersAsync();
    const r = await s.finished();
    const calls = requests(a);
    for (let i = 1; i < calls.length; i++) expect(calls[i]!.at - calls[i - 1]!.at).toBeGreaterThanOrEqual(1000);
    expect(calls.length).toBeLessThanOrEqual(Math.ceil(5000 / 1000) + 2);
    expect(a.visible('c')).toEqual([words]);
    expect(r).toMatchObject({ delivered: true, requests: calls.length });
    // Every draft is a prefix of the answer: the newest text, never an old one.
    for (const c of calls) expect(words.startsWith(c.text!.trimEnd())).toBe(true);
  });

  it('has at most one request in flight and coalesces what arrives meanwhile', async () => {
    const a = new RecordingAdapter('t');
    let inFlight = 0;
    let maxInFlight = 0;
    const slowEdit = a.edit.bind(a);
    a.edit = async (ref, text) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      await new Promise((r) => setTimeout(r, 700));
      inFlight--;
      return slowEdit(ref, text);
    };
    const s = stream(a);
    await feed(s, 'a b c d e f g h i j k l m n o p', 100);
    s.push({ type: 'done', usage });
    await vi.runAllTimersAsync();
    await s.finished();
    expect(maxInFlight).toBe(1);
    expect(requests(a).length).toBeLessThan(8);
    expect(a.visible('c')).toEqual(['a b c d e f g h i j k l m n o p']);
  });

  it('never re-sends identical text, and edit_interval_ms never goes below the platform floor', async () => {
    const a = new RecordingAdapter('t', { minEditIntervalMs: 1000 });
    const s = stream(a, { editIntervalMs: 10, showToolProgress: false });
    s.push({ type: 'text_delta', text: 'same' });
    await vi.advanceTimersByTimeAsync(1500);
    s.push({ type: 'tool_start', id: '1', name: 'clock', input: {} });
    s.push({ type: 'tool_end', id: '1', name: 'clock' });
    await vi.advanceTimersByTimeAsync(3000);
    s.push({ type: 'text_delta', text: ' more' });
    await vi.advanceTimersByTimeAsync(10);
    s.push({ type: 'done', usage });
    await vi.runAllTimersAsync();
    await s.finished();
    const calls = requests(a);
    expect(calls.map((c) => c.text)).toEqual(['same', 'same more']);
    expect(calls[1]!.at - calls[0]!.at).toBeGreaterThanOrEqual(1000);
  });

  it('on a 429 waits retry-after, then steps back to the floor, sending everything that arrived meanwhile in one edit', async () => {
    const a = new RecordingAdapter('t', { minEditIntervalMs: 1000 });
    let limited = 0;
    a.fault = (c) => {
      if (c.op === 'edit' && limited++ === 0) throw new ChannelError('CHANNEL_RATE_LIMITED', '429', { retryAfterMs: 5000 });
    };
    let rateLimited = 0;
    const s = stream(a, { onRateLimited: () => rateLimited++ });
    await feed(s, Array.from({ length: 240 }, (_, i) => `w${i}`).join(' '), 50);
    s.push({ type: 'done', usage });
    await vi.runAllTimersAsync();
    await s.finished();
    const calls = requests(a);
    expect(rateLimited).toBe(1);
    // send at 0, the refused edit at ~1000 (not recorded), then nothing for 5 s.
    expect(calls[1]!.at - calls[0]!.at).toBeGreaterThanOrEqual(6000);
    expect(calls[1]!.text!.split(' ').length).toBeGreaterThan(100);
    // One success halves the widened interval: the edits after it are back at the 1 s floor.
    const gaps = calls.slice(2).map((c, i) => c.at - calls[i + 1]!.at);
    expect(gaps.length).toBeGreaterThanOrEqual(3);
    expect(gaps[0]).toBeLessThan(2000);
    for (const g of gaps) expect(g).toBeGreaterThanOrEqual(1000);
    expect(gaps.slice(1, -1).every((g) => g < 1200)).toBe(true);
  });

  it('a window of 429s costs a few calls, and the pace is back at the floor soon after it', async () => {
    const a = new RecordingAdapter('t', { minEditIntervalMs: 1000 });
    const windowFrom = 3000;
    const windowTo = 13_000;
    let refused = 0;
    a.fault = (c) => {
      if (c.op === 'edit' && c.at >= windowFrom && c.at < windowTo) {
        refused++;
        // Like Telegram: retry_after says how long the limit still lasts, in whole seconds.
        throw new ChannelError('CHANNEL_RATE_LIMITED', '429', { retryAfterMs: Math.ceil((windowTo - c.at) / 1000) * 1000 });
      }
    };
    const s = stream(a);
    await feed(s, Array.from({ length: 600 }, (_, i) => `w${i}`).join(' '), 50); // 30 s
    s.push({ type: 'done', usage });
    await vi.runAllTimersAsync();
    await s.finished();
    expect(refused).toBeLessThanOrEqual(3);
    const after = requests(a).filter((c) => c.at >= windowTo);
    // Within 5 s of the window's end, consecutive edits are at the floor again.
    const atFloor = after.findIndex((c, i) => i > 0 && c.at - after[i - 1]!.at < 1200);
    expect(atFloor).toBeGreaterThan(0);
    expect(after[atFloor]!.at - windowTo).toBeLessThanOrEqual(5000);
  });

  it('the final text does not wait out a widened interval: the floor after the last edit, or at once', async () => {
    const a = new RecordingAdapter('t', { minEditIntervalMs: 1000 });
    const attempts: number[] = [];
    a.fault = (c) => {
      if (c.op !== 'edit') return;
      attempts.push(c.at);
      if (attempts.length <= 2) throw new ChannelError('CHANNEL_RATE_LIMITED', '429', { retryAfterMs: 100 });
    };
    const s = stream(a);
    const words = Array.from({ length: 45 }, (_, i) => `w${i}`).join(' ');
    await feed(s, words, 100);
    const lastToken = Date.now();
    s.push({ type: 'done', usage });
    await vi.runAllTimersAsync();
    await s.finished();
    // Two 429s widened the draft interval to 4 s (edits at 1 s, 3 s, then not before 7 s);
    // the turn ends at 4.5 s and the final goes then: one floor after the last request has passed.
    expect(attempts.slice(0, 2)).toEqual([1000, 3000]);
    expect(requests(a).at(-1)).toMatchObject({ text: words, at: lastToken });

    // A pause longer than the interval: the final goes the moment the turn ends.
    const b = new RecordingAdapter('t', { minEditIntervalMs: 1000 });
    const s2 = stream(b);
    s2.push({ type: 'text_delta', text: 'thinking' });
    await vi.advanceTimersByTimeAsync(5000);
    s2.push({ type: 'text_delta', text: ' done' });
    const end = Date.now();
    s2.push({ type: 'done', usage });
    await vi.runAllTimersAsync();
    await s2.finished();
    expect(requests(b).at(-1)).toMatchObject({ text: 'thinking done', at: end });
  });

  it("a final edit waits out the platform's floor only, never the channel's wider edit_interval_ms", async () => {
    const a = new RecordingAdapter('t', { minEditIntervalMs: 1000 });
    const s = stream(a, { editIntervalMs: 5000 });
    s.push({ type: 'text_delta', text: 'first' });
    await vi.advanceTimersByTimeAsync(100);
    s.push({ type: 'text_delta', text: ' last' });
    s.push({ type: 'done', usage });
    await vi.runAllTimersAsync();
    await s.finished();
    expect(requests(a).map((c) => [c.op, c.text, c.at])).toEqual([
      ['send', 'first', 0],
      ['edit', 'first last', 1000],
    ]);
  });

  it('after three failed drafts in a row it stops editing and delivers only the final text', async () => {
    const a = new RecordingAdapter('t', { minEditIntervalMs: 100 });
    let failing = true;
    let failures = 0;
    a.fault = (c) => {
      if (failing && c.op === 'edit') {
        failures++;
        throw new ChannelError('CHANNEL_UNAVAILABLE', '502');
      }
    };
    const s = stream(a);
    await feed(s, Array.from({ length: 100 }, (_, i) => `w${i}`).join(' '), 100);
    expect(failures).toBe(3);
    failing = false;
    s.push({ type: 'done', usage });
    await vi.runAllTimersAsync();
    await s.finished();
    expect(requests(a).map((c) => c.op)).toEqual(['send', 'edit']);
    expect(a.visible('c')[0]!.endsWith('w99')).toBe(true);
  });

  it('retries the final text until it lands', async () => {
    const a = new RecordingAdapter('t');
    let n = 0;
    a.fault = (c) => {
      if (c.op === 'send' && n++ < 4) throw new ChannelError('CHANNEL_NETWORK', 'reset');
    };
    const s = stream(a, { streamMode: 'final' });
    s.push({ type: 'text_delta', text: 'it lands' });
    s.push({ type: 'done', usage });
    await vi.runAllTimersAsync();
    expect(await s.finished()).toMatchObject({ delivered: true });
    expect(a.visible('c')).toEqual(['it lands']);
  });

  it('gives up on the final text at the deadline and says so', async () => {
    const a = new RecordingAdapter('t');
    a.fault = () => {
      throw new ChannelError('CHANNEL_NETWORK', 'down');
    };
    const s = stream(a, { streamMode: 'final', finalDeadlineMs: 5000 });
    s.push({ type: 'text_delta', text: 'lost' });
    s.push({ type: 'done', usage });
    await vi.runAllTimersAsync();
    expect(await s.finished()).toMatchObject({ delivered: false });
    expect(Date.now()).toBeLessThanOrEqual(5000 + 30_000);
  });

  it('a hard stop cuts a platform call that never answers: finished() resolves, the final text is not claimed delivered', async () => {
    const a = new RecordingAdapter('t', { minEditIntervalMs: 1000 });
    const hardStop = new AbortController();
    // The platform takes the first message, then never answers an edit.
    a.latency = (c) => (c.op === 'edit' ? new Promise(() => {}) : Promise.resolve());
    const s = stream(a, { signal: hardStop.signal });
    s.push({ type: 'text_delta', text: 'one ' });
    await vi.advanceTimersByTimeAsync(10);
    s.push({ type: 'text_delta', text: 'two' });
    await vi.advanceTimersByTimeAsync(1500); // the edit is in flight, hung
    s.push({ type: 'done', usage });
    await vi.advanceTimersByTimeAsync(10);
    let settled = false;
    const finished = s.finished().then((r) => ((settled = true), r));
    await vi.advanceTimersByTimeAsync(60_000);
    expect(settled).toBe(false); // still waiting on the hung edit
    hardStop.abort(new Error('exit now'));
    await vi.runAllTimersAsync();
    expect(await finished).toMatchObject({ delivered: false });
    expect(a.calls.map((c) => c.op)).toEqual(['send']);
    expect(a.visible('c')).toEqual(['one ']);
  });

  it('splits a long answer into messages at the limit, closing and reopening code fences', async () => {
    const a = new RecordingAdapter('t', { maxMessageLength: 200 });
    const s = stream(a);
    const code = Array.from({ length: 30 }, (_, i) => `print(${i})`).join('\n');
    const answer = `Here you go.\n\n\`\`\`python\n${code}\n\`\`\`\n\nDone.`;
    await feed(s, answer, 20);
    s.push({ type: 'done', usage });
    await vi.runAllTimersAsync();
    await s.finished();
    const parts = a.visible('c');
    expect(parts.length).toBeGreaterThan(1);
    for (const p of parts) {
      expect(p.length).toBeLessThanOrEqual(200);
      expect(openFenceAt(p)).toBeUndefined();
    }
    expect(parts.slice(1).some((p) => p.startsWith('```python\n'))).toBe(true);
  });

  it('cancelled: keeps the text and appends the stop marker', async () => {
    const a = new RecordingAdapter('t');
    const s = stream(a);
    s.push({ type: 'text_delta', text: 'half an answer' });
    await vi.advanceTimersByTimeAsync(10);
    s.push({ type: 'cancelled' });
    await vi.runAllTimersAsync();
    await s.finished();
    expect(a.visible('c')).toEqual([`half an answer\n\n${STOP_MARKER}`]);
  });

  it('error: keeps the text and adds a short readable message', async () => {
    const a = new RecordingAdapter('t');
    const s = stream(a);
    s.push({ type: 'text_delta', text: 'partial' });
    s.push({ type: 'error', code: 'PROVIDER_TIMEOUT', message: 'The model did not answer in time.' });
    await vi.runAllTimersAsync();
    await s.finished();
    expect(a.visible('c')).toEqual(['partial\n\n⚠️ The model did not answer in time.']);
  });

  it('an empty reply leaves no placeholder behind, and tool progress never reaches the final text', async () => {
    const a = new RecordingAdapter('t');
    const s = stream(a);
    s.push({ type: 'tool_start', id: '1', name: 'search', input: {} });
    await vi.advanceTimersByTimeAsync(100);
    expect(a.visible('c')).toEqual(['⏳ search…']);
    s.push({ type: 'tool_end', id: '1', name: 'search' });
    s.push({ type: 'done', usage });
    await vi.runAllTimersAsync();
    await s.finished();
    expect(a.visible('c')).toEqual([]);
    expect(a.calls.map((c) => c.op)).toContain('delete');

    const b = new RecordingAdapter('t');
    const s2 = stream(b);
    s2.push({ type: 'text_delta', text: 'Looking. ' });
    s2.push({ type: 'tool_start', id: '1', name: 'search', input: {} });
    await vi.advanceTimersByTimeAsync(100);
    expect(b.visible('c')[0]).toContain('⏳ search…');
    s2.push({ type: 'tool_end', id: '1', name: 'search' });
    s2.push({ type: 'text_delta', text: 'Found it.' });
    s2.push({ type: 'done', usage });
    await vi.runAllTimersAsync();
    await s2.finished();
    expect(b.visible('c')).toEqual(['Looking. Found it.']);
  });

  it('shows typing before the first text, refreshed at the platform cadence, and stops once text shows', async () => {
    const a = new RecordingAdapter('t', { typing: true, typingRefreshMs: 5000 });
    const s = stream(a);
    await vi.advanceTimersByTimeAsync(100);
    expect(a.calls.filter((c) => c.op === 'typing').length).toBe(0); // a fast answer needs none
    await vi.advanceTimersByTimeAsync(11_900);
    expect(a.calls.filter((c) => c.op === 'typing').length).toBe(3); // at 0.3 s, 5.3 s, 10.3 s
    s.push({ type: 'text_delta', text: 'here' });
    await vi.advanceTimersByTimeAsync(20_000);
    expect(a.calls.filter((c) => c.op === 'typing').length).toBe(3);
    s.push({ type: 'done', usage });
    await vi.runAllTimersAsync();
    await s.finished();
  });

  it('sends no typing while text waits for its first message (a busy daemon), and types again once drafts give up', async () => {
    const a = new RecordingAdapter('t', { typing: true, typingRefreshMs: 5000 });
    const held = a.hold((c) => c.op === 'send');
    const s = stream(a);
    s.push({ type: 'text_delta', text: 'here' });
    await held.reached;
    await vi.advanceTimersByTimeAsync(12_000);
    // The first message is on its way: a typing request would only queue in front of it.
    expect(a.calls.filter((c) => c.op === 'typing')).toEqual([]);
    held.release();
    s.push({ type: 'done', usage });
    await vi.runAllTimersAsync();
    await s.finished();
    expect(a.visible('c')).toEqual(['here']);

    // Drafts that keep failing stop (only the final text is tried): typing then comes back.
    const b = new RecordingAdapter('t', { typing: true, typingRefreshMs: 5000 });
    b.fault = (c) => {
      if (c.op === 'send') throw new ChannelError('CHANNEL_UNAVAILABLE', 'down');
    };
    const s2 = stream(b);
    s2.push({ type: 'text_delta', text: 'here' });
    await vi.advanceTimersByTimeAsync(30_000);
    expect(b.calls.filter((c) => c.op === 'typing').length).toBeGreaterThan(0);
    b.fault = undefined;
    s2.push({ type: 'done', usage });
    await vi.runAllTimersAsync();
    await s2.finished();

    // A platform without edits shows nothing until a chunk is whole: typing shows meanwhile.
    const c = new RecordingAdapter('t', { typing: true, typingRefreshMs: 5000, editsDrafts: false });
    const s3 = stream(c);
    s3.push({ type: 'text_delta', text: 'here' });
    await vi.advanceTimersByTimeAsync(6000);
    expect(c.calls.filter((x) => x.op === 'typing')).toHaveLength(2);
    s3.push({ type: 'done', usage });
    await vi.runAllTimersAsync();
    expect(c.visible('c')).toEqual(['here']);
  });

  it('adds one listener to the shared hard stop however many replies and requests: they listen on their own signals, and the hard stop still cuts them', async () => {
    const a = new RecordingAdapter('t', { typing: true });
    const held = a.hold((c) => c.op === 'send');
    const hard = new AbortController();
    const streams = Array.from({ length: 50 }, () => stream(a, { signal: hard.signal }));
    for (const s of streams) s.push({ type: 'text_delta', text: 'here' });
    await held.reached;
    await vi.advanceTimersByTimeAsync(1000);
    // Adding a listener walks the signal's whole list: 50 replies on one list cost 50× per add.
    expect(getEventListeners(hard.signal, 'abort')).toHaveLength(1);
    for (const s of streams) s.push({ type: 'done', usage });
    hard.abort(new Error('hard stop'));
    await vi.runAllTimersAsync();
    for (const s of streams) expect((await s.finished()).delivered).toBe(false);
    expect(a.aborted.filter((c) => c.op === 'send')).toHaveLength(50);
  });

  it('lets go of the hard stop once finished, and ends what it left in flight (a hanging typing request)', async () => {
    const a = new RecordingAdapter('t', { typing: true });
    const typing = a.hold((c) => c.op === 'typing');
    const hard = new AbortController();
    const streams = Array.from({ length: 20 }, () => stream(a, { signal: hard.signal, streamMode: 'final' }));
    await vi.advanceTimersByTimeAsync(2000);
    await typing.reached;
    // Each reply waits on the hard stop once while it runs, through its own stop: its requests
    // and its waits listen there (a turn's end wakes its waits directly, with no controller).
    expect(linkedTo(hard.signal)).toBe(20);
    for (const s of streams) {
      s.push({ type: 'text_delta', text: 'done already' });
      s.push({ type: 'done', usage });
    }
    await vi.runAllTimersAsync();
    for (const s of streams) expect((await s.finished()).delivered).toBe(true);
    // Still linked, each finished reply would be kept alive by the hard stop until shutdown.
    expect(linkedTo(hard.signal)).toBe(0);
    expect(a.aborted.filter((c) => c.op === 'typing').length).toBeGreaterThan(0);
    expect(hard.signal.aborted).toBe(false);
  });

  it("holds a visible reply's draft edits while another reply has nothing shown yet; its final text never waits", async () => {
    const gate = new FirstVisibleFirst();
    const { a, shown, held, other: waiting } = await visibleWhileAnotherWaits(gate, 10);
    expect(a.visible('c')).toEqual(['one ']);
    shown.push({ type: 'text_delta', text: ' ' });
    await vi.advanceTimersByTimeAsync(5000);
    // The other reply's first message goes before this one's refresh.
    expect(requests(a).map((c) => c.op)).toEqual(['send']);
    held.release();
    // Held back, the draft goes one interval later: a turn ending meanwhile sends its final at once.
    await vi.advanceTimersByTimeAsync(10);
    expect(requests(a)).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1000);
    expect(requests(a).map((c) => [c.op, c.text])).toEqual([
      ['send', 'one '],
      ['edit', 'one two '],
    ]);
    // Held again by a third reply: the final text goes anyway.
    const { held: held2, other: third } = await firstMessageHeld(gate);
    shown.push({ type: 'text_delta', text: 'three' });
    shown.push({ type: 'done', usage });
    await vi.advanceTimersByTimeAsync(2000);
    expect((await shown.finished()).delivered).toBe(true);
    expect(a.visible('c')).toEqual(['one two three']);
    expect(requests(a)).toHaveLength(3);
    held2.release();
    for (const s of [waiting, third]) s.push({ type: 'done', usage });
    await vi.runAllTimersAsync();
    for (const s of [waiting, third]) expect((await s.finished()).delivered).toBe(true);
    expect(gate.waiting).toBe(0);
  });

  it("a turn that ends while its draft is held for another reply's first message sends its final text at once; under a hard stop it gives up", async () => {
    const gate = new FirstVisibleFirst();
    const { a, shown, held, other } = await visibleWhileAnotherWaits(gate, 10);
    // Past its pace slot, the draft waits for the other reply's first message.
    await vi.advanceTimersByTimeAsync(3000);
    expect(requests(a)).toHaveLength(1);
    const end = Date.now();
    shown.push({ type: 'done', usage });
    await vi.advanceTimersByTimeAsync(0);
    expect(requests(a).map((c) => [c.op, c.text, c.at])).toEqual([
      ['send', 'one ', 0],
      ['edit', 'one two', end],
    ]);
    expect((await shown.finished()).delivered).toBe(true);

    // The same wait under a hard stop: the reply gives up, with no request after it.
    const hard = new AbortController();
    const second = await visibleWhileAnotherWaits(gate, 10, { signal: hard.signal });
    await vi.advanceTimersByTimeAsync(3000);
    expect(requests(second.a)).toHaveLength(1);
    hard.abort(new Error('exit now'));
    second.shown.push({ type: 'cancelled' });
    await vi.advanceTimersByTimeAsync(0);
    expect((await second.shown.finished()).delivered).toBe(false);
    expect(requests(second.a)).toHaveLength(1);
    for (const w of [held, second.held]) w.release();
    for (const s of [other, second.other]) s.push({ type: 'done', usage });
    await vi.runAllTimersAsync();
    for (const s of [other, second.other]) expect((await s.finished()).delivered).toBe(true);
    expect(gate.waiting).toBe(0);
  });

  it("a draft held only briefly for another reply's first message (normal running) goes at once when it lands", async () => {
    const gate = new FirstVisibleFirst();
    const { a, shown, held, other } = await visibleWhileAnotherWaits(gate, 500);
    // The draft's pace slot comes at 1 s; the other reply's first request is still in flight.
    await vi.advanceTimersByTimeAsync(520);
    expect(requests(a)).toHaveLength(1);
    held.release();
    await vi.advanceTimersByTimeAsync(1);
    expect(requests(a).map((c) => [c.op, c.text])).toEqual([
      ['send', 'one '],
      ['edit', 'one two'],
    ]);
    for (const s of [shown, other]) s.push({ type: 'done', usage });
    await vi.runAllTimersAsync();
    for (const s of [shown, other]) expect((await s.finished()).delivered).toBe(true);
  });

  it('stream_mode final sends one message at the end, with typing meanwhile', async () => {
    const a = new RecordingAdapter('t', { typing: true, typingRefreshMs: 4000 });
    const s = stream(a, { streamMode: 'final' });
    await feed(s, 'one two three four five six seven eight nine ten', 1000);
    s.push({ type: 'done', usage });
    await vi.runAllTimersAsync();
    await s.finished();
    expect(requests(a).map((c) => c.op)).toEqual(['send']);
    expect(a.calls.filter((c) => c.op === 'typing').length).toBeGreaterThanOrEqual(3);
  });

  it('keys each sent message by the reply key and chunk index, so platforms can make sends idempotent', async () => {
    const a = new RecordingAdapter('t', { maxMessageLength: 20 });
    const keys: string[] = [];
    const send = a.send.bind(a);
    a.send = (t, text, o) => (keys.push(o?.idempotencyKey ?? ''), send(t, text, o));
    const s = stream(a, { replyKey: 'chat:42' });
    s.push({ type: 'text_delta', text: 'first part of it. second part of it.' });
    s.push({ type: 'done', usage });
    await vi.runAllTimersAsync();
    await s.finished();
    expect(keys).toEqual(['chat:42:0', 'chat:42:1']);
  });

  it('a re-run edits the messages a previous run sent instead of sending new ones', async () => {
    const a = new RecordingAdapter('t');
    const old = await a.send(target, 'hal');
    const s = stream(a, { existingRefs: [old] });
    s.push({ type: 'text_delta', text: 'half and whole' });
    s.push({ type: 'done', usage });
    await vi.runAllTimersAsync();
    await s.finished();
    expect(a.visible('c')).toEqual(['half and whole']);
    expect(a.calls.filter((c) => c.op === 'send')).toHaveLength(1);
  });

  describe('native streaming', () => {
    function nativeAdapter(failOn?: 'open' | 'update') {
      const a = new RecordingAdapter('t', { nativeStream: true, minEditIntervalMs: 300 });
      const updates: string[] = [];
      a.openNativeStream = async () => {
        if (failOn === 'open') throw new ChannelError('CHANNEL_REQUEST_FAILED', 'no drafts here');
        const ns: NativeStream = {
          update: async (text) => {
            if (failOn === 'update' && updates.length === 1) throw new ChannelError('CHANNEL_REQUEST_FAILED', 'draft refused');
            updates.push(text);
          },
          finish: (text) => a.send(target, text),
        };
        return ns;
      };
      return { a, updates };
    }

    it('uses the native stream instead of edits, then sends the final text', async () => {
      const { a, updates } = nativeAdapter();
      const s = stream(a);
      await feed(s, 'one two three four five six', 200);
      s.push({ type: 'done', usage });
      await vi.runAllTimersAsync();
      await s.finished();
      expect(updates.length).toBeGreaterThanOrEqual(2);
      expect(a.calls.filter((c) => c.op === 'edit')).toHaveLength(0);
      expect(a.visible('c')).toEqual(['one two three four five six']);
    });

    it('the last word at once: a final that is a new message takes no pace slot after the drafts, only what a 429 asked', async () => {
      const a = new RecordingAdapter('t', { nativeStream: true, minEditIntervalMs: 1000 });
      const updates: number[] = [];
      let refuse = false;
      const sendTries: number[] = [];
      a.openNativeStream = async () => ({
        update: async () => void updates.push(Date.now()),
        finish: (text) => a.send(target, text),
        finishSendsMessage: true,
      });
      a.fault = (c) => {
        if (c.op === 'send') sendTries.push(c.at);
        if (c.op === 'send' && refuse) {
          refuse = false;
          throw new ChannelError('CHANNEL_RATE_LIMITED', '429', { retryAfterMs: 700 });
        }
      };
      const s = stream(a);
      s.push({ type: 'text_delta', text: 'one' });
      await vi.advanceTimersByTimeAsync(10);
      s.push({ type: 'text_delta', text: ' two' });
      await vi.advanceTimersByTimeAsync(100);
      const lastToken = Date.now();
      s.push({ type: 'done', usage });
      await vi.runAllTimersAsync();
      await s.finished();
      // The draft went at 0, so the next paced slot is at 1000: the final message does not wait for it.
      expect(updates).toEqual([0]);
      expect(requests(a).filter((c) => c.op === 'send')).toEqual([expect.objectContaining({ text: 'one two', at: lastToken })]);

      // A 429 on the final message is waited out, as the platform asked, and no longer.
      const b = new RecordingAdapter('t', { minEditIntervalMs: 1000 });
      b.fault = a.fault;
      refuse = true;
      sendTries.length = 0;
      const s2 = stream(b);
      s2.push({ type: 'text_delta', text: 'hello' });
      const end = Date.now();
      s2.push({ type: 'done', usage });
      await vi.runAllTimersAsync();
      await s2.finished();
      expect(sendTries.map((at) => at - end)).toEqual([0, 700]);
      expect(b.visible('c')).toEqual(['hello']);
    });

    it('a 429 on a draft pauses the drafts for retry_after and resumes them: no message mid-answer', async () => {
      const a = new RecordingAdapter('t', { nativeStream: true, minEditIntervalMs: 300 });
      const updates: Array<{ text: string; at: number }> = [];
      let refusedAt = -1;
      a.openNativeStream = async () => ({
        update: async (text) => {
          if (updates.length === 2 && refusedAt < 0) {
            refusedAt = Date.now();
            throw new ChannelError('CHANNEL_RATE_LIMITED', '429', { retryAfterMs: 3000 });
          }
          updates.push({ text, at: Date.now() });
        },
        finish: (text) => a.send(target, text),
      });
      let fallbacks = 0;
      const s = stream(a, { onFallback: () => fallbacks++ });
      await feed(s, Array.from({ length: 60 }, (_, i) => `w${i}`).join(' '), 100);
      s.push({ type: 'done', usage });
      await vi.runAllTimersAsync();
      await s.finished();
      expect(fallbacks).toBe(0);
      expect(refusedAt).toBeGreaterThan(0);
      const resumed = updates.filter((u) => u.at > refusedAt);
      expect(resumed.length).toBeGreaterThanOrEqual(2);
      expect(resumed[0]!.at - refusedAt).toBeGreaterThanOrEqual(3000);
      // The only real message is the final one.
      expect(a.calls.filter((c) => c.op === 'send')).toHaveLength(1);
      expect(a.calls.filter((c) => c.op === 'edit')).toHaveLength(0);
      expect(a.visible('c')).toEqual([Array.from({ length: 60 }, (_, i) => `w${i}`).join(' ')]);
    });

    it('falls back to send + edit for the rest of the turn when the native call fails once, losing no text', async () => {
      const { a, updates } = nativeAdapter('update');
      let fallbacks = 0;
      const s = stream(a, { onFallback: () => fallbacks++ });
      await feed(s, 'one two three four five six seven eight', 200);
      s.push({ type: 'done', usage });
      await vi.runAllTimersAsync();
      await s.finished();
      expect(fallbacks).toBe(1);
      expect(updates).toHaveLength(1);
      expect(a.calls.filter((c) => c.op === 'edit').length).toBeGreaterThanOrEqual(1);
      expect(a.visible('c')).toEqual(['one two three four five six seven eight']);
    });
  });
});
