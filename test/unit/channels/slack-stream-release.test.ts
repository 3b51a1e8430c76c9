import { describe, expect, it } from 'vitest';
import type { AgentEvent } from '../../../src/contracts/agent-events.js';
import type { ReplyTarget } from '../../../src/contracts/message.js';
import type { FakeSlack } from '../../fakes/slack/server.js';
import { waitFor } from '../../helpers/daemon.js';
import { slackAdapterOn, withSlack } from '../../helpers/platforms.js';
import { streamOn } from '../../helpers/reply-stream.js';

const done: AgentEvent = { type: 'done', usage: { inputTokens: 0, outputTokens: 0, estimated: true } };
const DM: ReplyTarget = { channelId: 'sl', chatId: 'D0DM0001', chatType: 'dm', threadId: '1700000000.000100' };

const stops = (sl: FakeSlack) => sl.callsOf('chat.stopStream');
const streamed = (sl: FakeSlack) => sl.messages.filter((m) => m.stream);

/** A reply streamed natively to a DM thread by the real Slack adapter on the fake; its signal never aborts. */
async function replyOnSlack(finalDeadlineMs: number) {
  const sl = await withSlack();
  const adapter = slackAdapterOn(sl);
  const stream = streamOn(adapter, { target: DM, finalDeadlineMs });
  stream.push({ type: 'text_delta', text: 'one ' });
  await waitFor(() => streamed(sl)[0]?.stream?.chunks.length === 1);
  return { sl, adapter, stream };
}

describe('Slack native streams: a reply that gives up on its final text leaves no message streaming', () => {
  // Before: the reply gave up (delivered false) and never called the stream again, and the
  // stream stopped itself only when the reply's signal aborted: the message stayed "streaming".
  it('a final chat.stopStream rate-limited past the deadline: after the reply gives up, one chat.stopStream without text, nothing else', async () => {
    // A deadline shorter than the Retry-After: the reply gives up after that 429, without trying again.
    const { sl, adapter, stream } = await replyOnSlack(300);
    sl.fail('chat.stopStream', { status: 429, retryAfter: 1 });
    stream.push({ type: 'text_delta', text: 'two' });
    stream.push(done);
    expect((await stream.finished()).delivered).toBe(false);
    const gaveUpAt = sl.calls.length;
    await waitFor(() => stops(sl).length >= 2);
    await adapter.close();
    const [message] = streamed(sl);
    expect(stops(sl).map((c) => [c.args.ts, c.args.markdown_text])).toEqual([
      [message!.ts, 'two'],
      [message!.ts, undefined],
    ]);
    // Only that stop after the reply gave up: no edit, no post, no second stop.
    expect(sl.calls.slice(gaveUpAt).map((c) => c.method)).toEqual(['chat.stopStream']);
    expect(message!.stream).toEqual({ chunks: [expect.stringContaining('one')], stopped: true });
  });

  it('a final that landed: its chat.stopStream is the only one', async () => {
    const { sl, adapter, stream } = await replyOnSlack(60_000);
    stream.push({ type: 'text_delta', text: 'two' });
    stream.push(done);
    expect((await stream.finished()).delivered).toBe(true);
    await adapter.close();
    expect(stops(sl).map((c) => c.args.markdown_text)).toEqual(['two']);
    expect(streamed(sl).map((m) => [m.text, m.stream!.stopped])).toEqual([['one two', true]]);
  });

  it('a final chat.stopStream Slack fails (not a 429): the stream is stopped before the message is edited to the whole text', async () => {
    const { sl, adapter, stream } = await replyOnSlack(60_000);
    // Slack does not document chat.update on a message still streaming: the fake refuses it.
    sl.refuseUpdateWhileStreaming = true;
    sl.fail('chat.stopStream', { error: 'internal_error' });
    stream.push({ type: 'text_delta', text: 'two' });
    stream.push(done);
    expect((await stream.finished()).delivered).toBe(true);
    await adapter.close();
    const [message] = streamed(sl);
    expect(stops(sl).map((c) => c.args.markdown_text)).toEqual(['two', undefined]);
    // The stop, then the edits (markdown_text refused by this fake, then mrkdwn): no second message.
    expect(sl.calls.slice(2).map((c) => c.method)).toEqual(['chat.stopStream', 'chat.stopStream', 'chat.update', 'chat.update']);
    expect([message!.text, message!.stream!.stopped]).toEqual(['one two', true]);
  });
});

describe('SlackStream release', () => {
  async function openOnSlack() {
    const sl = await withSlack();
    const adapter = slackAdapterOn(sl);
    const ns = (await adapter.openNativeStream(DM, { signal: new AbortController().signal }))!;
    await ns.update!('one', { signal: new AbortController().signal });
    return { sl, adapter, ns };
  }

  it('stops a stream still open once, without text, however often it is called', async () => {
    const { sl, adapter, ns } = await openOnSlack();
    ns.release!();
    ns.release!();
    await waitFor(() => stops(sl).length >= 1);
    await adapter.close();
    expect(stops(sl).map((c) => c.args.markdown_text)).toEqual([undefined]);
    expect(streamed(sl)[0]!.stream).toEqual({ chunks: ['one'], stopped: true });
  });

  it('after its end, or with its end in flight, sends nothing', async () => {
    const { sl, adapter, ns } = await openOnSlack();
    let land!: () => void;
    sl.fail('chat.stopStream', { until: new Promise<void>((r) => (land = r)) });
    const finishing = ns.finish('one two', { signal: new AbortController().signal, final: true });
    await waitFor(() => stops(sl).length === 1);
    ns.release!();
    land();
    await finishing;
    ns.release!();
    await adapter.close();
    expect(stops(sl).map((c) => c.args.markdown_text)).toEqual([' two']);
    expect(streamed(sl)[0]!.stream!.stopped).toBe(true);
  });
});
