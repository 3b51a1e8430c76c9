import type { ChannelAdapter } from '../../src/contracts/channel.js';
import type { Transport } from '../../src/stream/reply-options.js';
import { ReplyStream, type ReplyStreamOptions } from '../../src/stream/reply-stream.js';

/**
 * A streamed reply (drafts on) on `a` (a RecordingAdapter, or a real adapter on a fake), as the
 * stream tests drive it: to chat `c` of channel `t` (a DM), with `a`'s capabilities, no tool
 * progress, a final deadline no test reaches and a signal that never aborts; `more` replaces any of them.
 */
export function streamOn(a: Transport & Pick<ChannelAdapter, 'capabilities'>, more: Partial<ReplyStreamOptions> = {}): ReplyStream {
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
