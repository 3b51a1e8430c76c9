import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { NativeStream } from '../../../src/contracts/channel.js';
import { ChannelError } from '../../../src/contracts/errors.js';
import type { MessageRef } from '../../../src/contracts/message.js';
import { RecordingAdapter } from '../../helpers/recording-adapter.js';
import { streamOn } from '../../helpers/reply-stream.js';

const done = { type: 'done', usage: { inputTokens: 0, outputTokens: 0, estimated: true } } as const;

/**
 * A native stream on `a` whose end does what `end` says (lands as a message by default), recording
 * each call on it, with the time; `release` notes how many messages had been sent by then.
 */
function scriptedStream(
  a: RecordingAdapter,
  end: (text: string) => Promise<MessageRef> = (text) => a.send({ channelId: 't', chatId: 'c', chatType: 'dm' }, text),
) {
  const log: string[] = [];
  a.openNativeStream = async (): Promise<NativeStream> => ({
    update: async (text) => void log.push(`update ${text} @${Date.now()}`),
    finish: (text) => (log.push(`finish ${text} @${Date.now()}`), end(text)),
    release: () => void log.push(`release @${Date.now()} after ${a.calls.filter((c) => c.op === 'send').length} sends`),
  });
  return log;
}

const rateLimited = () => new ChannelError('CHANNEL_RATE_LIMITED', '429', { retryAfterMs: 400 });

describe('ReplyStream: a native stream the reply leaves open is released, once', () => {
  beforeEach(() => vi.useFakeTimers({ now: 0 }));
  afterEach(() => vi.useRealTimers());

  // Before: the reply gave up on its final text and never called the stream again, so a
  // stream that ends only when told stayed open (Slack showed the message streaming).
  it('a final end rate-limited past the deadline: released after the last try, nothing sent', async () => {
    const a = new RecordingAdapter('t', { nativeStream: true, minEditIntervalMs: 100 });
    const log = scriptedStream(a, () => Promise.reject(rateLimited()));
    const s = streamOn(a, { finalDeadlineMs: 1000 });
    s.push({ type: 'text_delta', text: 'one' });
    await vi.advanceTimersByTimeAsync(10);
    s.push(done);
    await vi.runAllTimersAsync();
    expect((await s.finished()).delivered).toBe(false);
    // Tries at the floor (100), 500 and 900; the 429 after the third asks past the deadline (1,010).
    expect(log).toEqual(['update one @0', 'finish one @100', 'finish one @500', 'finish one @900', 'release @900 after 0 sends']);
    expect(a.calls).toEqual([]);
  });

  it('a final end that landed: no release', async () => {
    const a = new RecordingAdapter('t', { nativeStream: true, minEditIntervalMs: 100 });
    const log = scriptedStream(a);
    const s = streamOn(a);
    s.push({ type: 'text_delta', text: 'one' });
    await vi.advanceTimersByTimeAsync(10);
    s.push({ type: 'text_delta', text: ' two' });
    s.push(done);
    await vi.runAllTimersAsync();
    expect((await s.finished()).delivered).toBe(true);
    expect(log).toEqual(['update one @0', 'finish one two @100']);
    expect(a.visible('c')).toEqual(['one two']);
  });

  it('an end that fails (not a 429): released before the reply sends the text as a message', async () => {
    const a = new RecordingAdapter('t', { nativeStream: true, minEditIntervalMs: 100 });
    const log = scriptedStream(a, () => Promise.reject(new ChannelError('CHANNEL_REQUEST_FAILED', 'refused')));
    const s = streamOn(a);
    s.push({ type: 'text_delta', text: 'one' });
    await vi.advanceTimersByTimeAsync(10);
    s.push(done);
    await vi.runAllTimersAsync();
    expect((await s.finished()).delivered).toBe(true);
    expect(log).toEqual(['update one @0', 'finish one @100', 'release @100 after 0 sends']);
    expect(a.visible('c')).toEqual(['one']);
  });

  it('a reply cut mid-stream: released once; one its user stopped: not released', async () => {
    const a = new RecordingAdapter('t', { nativeStream: true, minEditIntervalMs: 100 });
    const log = scriptedStream(a);
    const cut = new AbortController();
    const s = streamOn(a, { signal: cut.signal });
    s.push({ type: 'text_delta', text: 'one' });
    await vi.advanceTimersByTimeAsync(10);
    cut.abort();
    s.push({ type: 'cancelled' });
    await vi.runAllTimersAsync();
    expect((await s.finished()).delivered).toBe(false);
    expect(log).toEqual(['update one @0', 'release @10 after 0 sends']);

    const b = new RecordingAdapter('t', { nativeStream: true, minEditIntervalMs: 100 });
    const stopped = scriptedStream(b, () => Promise.reject(new ChannelError('REPLY_STOPPED_BY_USER', 'stopped')));
    const s2 = streamOn(b);
    s2.push({ type: 'text_delta', text: 'one' });
    await vi.advanceTimersByTimeAsync(10);
    s2.push(done);
    await vi.runAllTimersAsync();
    await s2.finished();
    expect(stopped.filter((l) => l.startsWith('release'))).toEqual([]);
  });
});
