import { ReplyStream, type ReplyStreamOptions } from '../../src/stream/reply-stream.js';
import type { RecordingAdapter } from './recording-adapter.js';

/**
 * A streamed reply (drafts on) on `a`, as the stream tests drive it: to chat `c` of channel
 * `t` (a DM), with `a`'s capabilities, no tool progress and a final deadline no test reaches;
 * `more` replaces any of them.
 */
export function streamOn(a: RecordingAdapter, more: Partial<ReplyStreamOptions> = {}): ReplyStream {
  return new ReplyStream({
    transport: a,
    capabilities: a.capabilities,
    target: { channelId: 't', chatId: 'c', chatType: 'dm' },
    streamMode: 'partial',
    showToolProgress: false,
    finalDeadlineMs: 60_000,
    signal: new AbortController().signal,
    ...more,
  });
}
