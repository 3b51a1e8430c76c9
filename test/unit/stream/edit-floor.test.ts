import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ReplyStream } from '../../../src/stream/reply-stream.js';
import { RecordingAdapter } from '../../helpers/recording-adapter.js';

const target = { channelId: 't', chatId: 'c', chatType: 'dm' as const };

describe('ReplyStream edit interval', () => {
  beforeEach(() => vi.useFakeTimers({ now: 0 }));
  afterEach(() => vi.useRealTimers());

  // Text keeps arriving every 20 ms, so an edit is always due: only the clamp to the platform
  // floor keeps the drafts 1 s apart when the channel asks for 10 ms.
  it('an edit_interval_ms below the platform floor is raised to the floor', async () => {
    const a = new RecordingAdapter('t', { minEditIntervalMs: 1000 });
    const s = new ReplyStream({
      transport: a,
      capabilities: a.capabilities,
      target,
      streamMode: 'partial',
      showToolProgress: false,
      finalDeadlineMs: 60_000,
      editIntervalMs: 10,
      signal: new AbortController().signal,
    });
    for (let i = 0; i < 100; i++) {
      s.push({ type: 'text_delta', text: `w${i} ` });
      await vi.advanceTimersByTimeAsync(20);
    }
    const drafts = a.calls.filter((c) => c.op !== 'typing');
    expect(drafts.length).toBeGreaterThan(1);
    for (let i = 1; i < drafts.length; i++) expect(drafts[i]!.at - drafts[i - 1]!.at).toBeGreaterThanOrEqual(1000);
    s.push({ type: 'done', usage: { inputTokens: 0, outputTokens: 0, estimated: true } });
    await vi.runAllTimersAsync();
    await s.finished();
  });
});
