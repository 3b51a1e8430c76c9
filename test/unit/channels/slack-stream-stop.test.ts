import { describe, expect, it } from 'vitest';
import type { SlackAdapter } from '../../../channels/slack/adapter.js';
import type { AgentEvent } from '../../../src/contracts/agent-events.js';
import type { ReplyTarget } from '../../../src/contracts/message.js';
import { STOP_MARKER } from '../../../src/stream/reply-stream.js';
import type { FakeSlack } from '../../fakes/slack/server.js';
import { LogSink, waitFor } from '../../helpers/daemon.js';
import { withChannelDaemon } from '../../helpers/fixtures.js';
import { slackAdapterOn, slackChannel, slackEnv, withSlack } from '../../helpers/platforms.js';
import { streamOn } from '../../helpers/reply-stream.js';
import { echoAgent } from '../../helpers/toml.js';

const done: AgentEvent = { type: 'done', usage: { inputTokens: 0, outputTokens: 0, estimated: true } };
const DM: ReplyTarget = { channelId: 'sl', chatId: 'D0DM0001', chatType: 'dm', threadId: '1700000000.000100' };

/** A Slack adapter on the fake as the daemon builds one (native streams, replies in threads), its log lines kept. */
function adapterOn(sl: FakeSlack) {
  const logs = new LogSink();
  return { adapter: slackAdapterOn(sl, { logs }), logs };
}

/**
 * A reply streamed natively to a DM thread, cut when `cut` aborts (the daemon's hard stop, a
 * lost lease); its turn then ends as a cut turn does, cancelled, which ends the reply.
 */
function replyOn(adapter: SlackAdapter, cut = new AbortController()) {
  return { stream: streamOn(adapter, { target: DM, signal: cut.signal }), cut };
}

const stops = (sl: FakeSlack) => sl.callsOf('chat.stopStream');
const streamed = (sl: FakeSlack) => sl.messages.filter((m) => m.stream);

describe('Slack native streams: every stream started is stopped once', () => {
  // Before: with the reply's signal aborted nothing called chat.stopStream (stopQuietly and
  // the final step both skip an aborted signal), so the message stayed "streaming" in Slack.
  it('a reply cut while an append is in flight: that append lands, then one chat.stopStream without text', async () => {
    const sl = await withSlack();
    const { adapter } = adapterOn(sl);
    const { stream, cut } = replyOn(adapter);
    stream.push({ type: 'text_delta', text: 'one ' });
    await waitFor(() => sl.callsOf('chat.appendStream').length === 1);
    let release!: () => void;
    sl.fail('chat.appendStream', { until: new Promise<void>((r) => (release = r)) });
    stream.push({ type: 'text_delta', text: 'two ' });
    await waitFor(() => sl.callsOf('chat.appendStream').length === 2);
    cut.abort();
    stream.push({ type: 'cancelled' });
    expect((await stream.finished()).delivered).toBe(false);
    // The append lands after the reply was cut; only then may the stop go.
    expect(stops(sl)).toEqual([]);
    release();
    await waitFor(() => stops(sl).length >= 1);
    await adapter.close();
    const [message] = streamed(sl);
    expect(stops(sl)).toHaveLength(1);
    expect(stops(sl)[0]!.args).toEqual(expect.objectContaining({ channel: 'D0DM0001', ts: message!.ts }));
    expect(stops(sl)[0]!.args.markdown_text).toBeUndefined();
    // What was shown is kept, the append that was in flight included: it landed before the stop.
    expect(message!.stream).toEqual({ chunks: [expect.stringContaining('one'), expect.stringContaining('two')], stopped: true });
  });

  it('a reply cut between appends (nothing in flight): one chat.stopStream', async () => {
    const sl = await withSlack();
    const { adapter } = adapterOn(sl);
    const { stream, cut } = replyOn(adapter);
    stream.push({ type: 'text_delta', text: 'one ' });
    await waitFor(() => streamed(sl)[0]?.stream?.chunks.length === 1);
    cut.abort();
    stream.push({ type: 'cancelled' });
    await stream.finished();
    await waitFor(() => stops(sl).length >= 1);
    await adapter.close();
    expect(stops(sl)).toHaveLength(1);
    expect(streamed(sl).map((m) => m.stream!.stopped)).toEqual([true]);
  });

  it('a daemon stopped at once mid-stream (its hard stop): the stream is stopped once before the stop returns', async () => {
    const sl = await withSlack();
    const d = await withChannelDaemon(echoAgent(150) + slackChannel(sl), slackEnv(sl));
    await waitFor(() => sl.openSockets.length > 0, 10_000);
    sl.push(sl.dmEvent(Array.from({ length: 60 }, (_, i) => `w${i}`).join(' ')));
    await waitFor(() => sl.callsOf('chat.appendStream').length >= 1, 10_000);
    // SIGTERM, then a second one: the turn's signal aborts with its answer half streamed.
    const stopping = d.stop();
    d.daemon.abortNow();
    await stopping;
    const [message] = streamed(sl);
    expect(stops(sl).map((c) => c.args.ts)).toEqual([message!.ts]);
    expect(message!.stream!.stopped).toBe(true);
    expect(message!.text).toContain('w0');
  });

  it('a start cut while Slack still starts the stream: the stream Slack started is stopped once', async () => {
    const sl = await withSlack();
    const { adapter } = adapterOn(sl);
    let release!: () => void;
    sl.fail('chat.startStream', { until: new Promise<void>((r) => (release = r)) });
    const cut = new AbortController();
    const opening = adapter.openNativeStream(DM, { signal: cut.signal });
    await waitFor(() => sl.callsOf('chat.startStream').length === 1);
    cut.abort();
    await expect(opening).rejects.toThrow();
    // Slack starts the stream after the call was cut.
    release();
    await waitFor(() => stops(sl).length >= 1);
    await adapter.close();
    expect(stops(sl).map((c) => c.args.ts)).toEqual([streamed(sl)[0]!.ts]);
    expect(streamed(sl)[0]!.stream!.stopped).toBe(true);
  });

  it("a cut reply's stop that Slack rate-limits goes again after its retry-after, and close waits for it", async () => {
    const sl = await withSlack();
    const { adapter } = adapterOn(sl);
    const { stream, cut } = replyOn(adapter);
    stream.push({ type: 'text_delta', text: 'one ' });
    await waitFor(() => streamed(sl)[0]?.stream?.chunks.length === 1);
    sl.fail('chat.stopStream', { status: 429, retryAfter: 1 });
    cut.abort();
    stream.push({ type: 'cancelled' });
    await stream.finished();
    await adapter.close();
    expect(stops(sl)).toHaveLength(2);
    expect(streamed(sl)[0]!.stream!.stopped).toBe(true);
  });

  it("a cut reply's stop that fails is logged, never thrown", async () => {
    const sl = await withSlack();
    const { adapter, logs } = adapterOn(sl);
    const { stream, cut } = replyOn(adapter);
    stream.push({ type: 'text_delta', text: 'one ' });
    await waitFor(() => streamed(sl)[0]?.stream?.chunks.length === 1);
    sl.fail('chat.stopStream', { error: 'internal_error' });
    cut.abort();
    stream.push({ type: 'cancelled' });
    await stream.finished();
    await adapter.close();
    expect(stops(sl)).toHaveLength(1);
    expect(logs.entries()).toEqual([
      expect.objectContaining({ level: 40, chat: 'D0DM0001', ts: streamed(sl)[0]!.ts, msg: expect.stringContaining('could not be stopped') }),
    ]);
  });

  it('a reply that ends (done, or stopped by its user) still stops its stream once, with the rest of its text', async () => {
    const sl = await withSlack();
    const { adapter } = adapterOn(sl);
    for (const [i, ending] of [done, { type: 'cancelled' } as const].entries()) {
      const { stream } = replyOn(adapter);
      stream.push({ type: 'text_delta', text: 'one ' });
      await waitFor(() => sl.callsOf('chat.appendStream').length === i + 1);
      stream.push({ type: 'text_delta', text: 'two' });
      stream.push(ending);
      expect((await stream.finished()).delivered).toBe(true);
    }
    const messages = streamed(sl);
    expect(stops(sl).map((c) => c.args.ts)).toEqual(messages.map((m) => m.ts));
    expect(messages.map((m) => [m.text, m.stream!.stopped])).toEqual([
      ['one two', true],
      [`one two\n\n${STOP_MARKER}`, true],
    ]);
  });
});
