import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ChannelError } from '../../../src/contracts/errors.js';
import { FirstVisibleFirst } from '../../../src/stream/first-visible.js';
import { RecordingAdapter } from '../../helpers/recording-adapter.js';
import { streamOn } from '../../helpers/reply-stream.js';

const done = { type: 'done', usage: { inputTokens: 0, outputTokens: 0, estimated: true } } as const;

/** The platform calls of a reply but typing, as [op, when it started]. */
const sends = (a: RecordingAdapter) => a.calls.filter((c) => c.op !== 'typing').map((c) => [c.op, c.startedAt]);

/** Counts `a`'s native-stream opens; each is passed on to `open` (by default `a`'s own). */
function countingOpens(a: RecordingAdapter, open = a.openNativeStream!): { count: number } {
  const opens = { count: 0 };
  a.openNativeStream = (t, o) => {
    opens.count++;
    return open(t, o);
  };
  return opens;
}

/** Each wait a reply makes is one the platform's limit or the design asks for, and no longer. */
describe('ReplyStream waits', () => {
  beforeEach(() => vi.useFakeTimers({ now: 0 }));
  afterEach(() => vi.useRealTimers());

  // Where the platform has no native stream for the chat (a group, a client without
  // corrections) the open sends nothing: the first message must not wait an interval for it.
  it('sends the first message at once where the chat has no native stream', async () => {
    const a = new RecordingAdapter('t', { nativeStream: true, minEditIntervalMs: 1500 });
    const opens = countingOpens(a, async () => undefined);
    const s = streamOn(a);
    s.push({ type: 'text_delta', text: 'hello' });
    await vi.advanceTimersByTimeAsync(2000);
    expect(opens.count).toBe(1);
    expect(sends(a)).toEqual([['send', 0]]);
    s.push(done);
    await vi.runAllTimersAsync();
    expect((await s.finished()).requests).toBe(1);
  });

  // A reply that ends before its first draft goes as one message: opening a native stream
  // only to finish it at once costs a request (Slack's chat.startStream) and its round trip.
  it('opens no native stream for a reply that ends before its first draft', async () => {
    const a = new RecordingAdapter('t', { nativeStream: true, minEditIntervalMs: 1000 });
    const opens = countingOpens(a);
    const s = streamOn(a);
    s.push({ type: 'text_delta', text: 'short answer' });
    s.push(done);
    await vi.runAllTimersAsync();
    const r = await s.finished();
    expect([opens.count, r.requests, r.delivered]).toEqual([0, 1, true]);
    expect(sends(a)).toEqual([['send', 0]]);
    expect(a.visible('c')).toEqual(['short answer']);
  });

  // Floor 1 s, the channel's interval 3 s: a draft edit at 3,000 fails with a server error
  // and the turn ends at 3,100. The final edit backs off from the platform's floor (twice
  // 1 s), not from the channel's wider interval (twice 3 s, which put it at 9,000).
  it("backs the final text off from the platform's floor after a failed draft, not from the channel's interval", async () => {
    const a = new RecordingAdapter('t', { minEditIntervalMs: 1000 });
    let failNext = false;
    let failedAt = -1;
    a.fault = (c) => {
      if (failNext && c.op === 'edit') {
        failNext = false;
        failedAt = c.startedAt;
        throw new ChannelError('CHANNEL_UNAVAILABLE', 'HTTP 502');
      }
    };
    const s = streamOn(a, { editIntervalMs: 3000 });
    s.push({ type: 'text_delta', text: 'one ' });
    await vi.advanceTimersByTimeAsync(2000);
    failNext = true;
    s.push({ type: 'text_delta', text: 'two ' });
    await vi.advanceTimersByTimeAsync(1100);
    s.push({ type: 'text_delta', text: 'three' });
    s.push(done);
    await vi.runAllTimersAsync();
    expect((await s.finished()).delivered).toBe(true);
    expect(failedAt).toBe(3000);
    expect(sends(a)).toEqual([
      ['send', 0],
      ['edit', 5000],
    ]);
  });

  // A chat that refuses the bot (CHANNEL_FORBIDDEN is not retryable): drafting stops after
  // the first refusal and releases the first-visible gate, so other replies' drafts are not
  // held while it would be tried again; the final text is tried once and reported undelivered.
  it('stops drafting at a refusal no retry changes and lets other replies go', async () => {
    const gate = new FirstVisibleFirst();
    const a = new RecordingAdapter('t', { minEditIntervalMs: 1000 });
    const tries: number[] = [];
    a.fault = (c) => {
      if (c.op !== 'send') return;
      tries.push(c.startedAt);
      throw new ChannelError('CHANNEL_FORBIDDEN', 'HTTP 403: bot was blocked by the user');
    };
    const s = streamOn(a, { firstVisible: gate });
    s.push({ type: 'text_delta', text: 'hello' });
    await vi.advanceTimersByTimeAsync(0);
    expect(gate.waiting).toBe(0);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(tries).toEqual([0]);
    s.push(done);
    await vi.runAllTimersAsync();
    expect((await s.finished()).delivered).toBe(false);
    expect(tries).toEqual([0, 10_000]);
  });
  // CHANNEL_REQUEST_FAILED is not retryable, but it is what most platforms' 4xx and Slack's
  // internal_error come as: drafting goes on after it, and the next draft shows the text.
  it('goes on drafting after a refused request that is not a refusal of the chat', async () => {
    const a = new RecordingAdapter('t', { minEditIntervalMs: 1000 });
    let failNext = true;
    a.fault = (c) => {
      if (failNext && c.op === 'send') {
        failNext = false;
        throw new ChannelError('CHANNEL_REQUEST_FAILED', 'Slack: internal_error');
      }
    };
    const s = streamOn(a);
    s.push({ type: 'text_delta', text: 'hello' });
    await vi.advanceTimersByTimeAsync(5000);
    expect(sends(a)).toEqual([['send', 2000]]);
    s.push(done);
    await vi.runAllTimersAsync();
    expect((await s.finished()).delivered).toBe(true);
  });

  // An open that takes a while to find no stream (XMPP asks the person's client): a turn that
  // ended meanwhile sends its whole final text as one message, not the older draft and then
  // a correction a floor later.
  it('sends the whole final text when the turn ended while the open found no stream', async () => {
    const a = new RecordingAdapter('t', { nativeStream: true, minEditIntervalMs: 1000 });
    a.openNativeStream = () => new Promise((resolve) => setTimeout(() => resolve(undefined), 500));
    const s = streamOn(a);
    s.push({ type: 'text_delta', text: 'one ' });
    await vi.advanceTimersByTimeAsync(200);
    s.push({ type: 'text_delta', text: 'two' });
    s.push(done);
    await vi.runAllTimersAsync();
    expect(a.calls.filter((c) => c.op !== 'typing').map((c) => [c.op, c.text, c.startedAt])).toEqual([['send', 'one two', 500]]);
  });

  // A first draft already longer than one message would only open a native stream to finish it.
  it('opens no native stream for a first draft longer than one message', async () => {
    const a = new RecordingAdapter('t', { nativeStream: true, minEditIntervalMs: 1000, maxMessageLength: 10 });
    const opens = countingOpens(a);
    const s = streamOn(a);
    s.push({ type: 'text_delta', text: 'aaaa bbbb cccc dddd' });
    await vi.advanceTimersByTimeAsync(0);
    expect(opens.count).toBe(0);
    expect(sends(a)[0]).toEqual(['send', 0]);
    s.push(done);
    await vi.runAllTimersAsync();
    expect(a.visible('c').join('')).toBe('aaaa bbbb cccc dddd');
  });
});
