import { beforeEach, describe, expect, it } from 'vitest';
import type { SlackAdapter } from '../../channels/slack/adapter.js';
import type { AgentEvent } from '../../src/contracts/agent-events.js';
import { ReplyStream } from '../../src/stream/reply-stream.js';
import type { FakeSlack } from '../fakes/slack/server.js';
import { waitFor } from '../helpers/daemon.js';
import { withChannelDaemon } from '../helpers/fixtures.js';
import { slackAdapterOn, slackChannel, slackEnv, withSlack } from '../helpers/platforms.js';
import { echoAgent } from '../helpers/toml.js';

const done: AgentEvent = { type: 'done', usage: { inputTokens: 0, outputTokens: 0, estimated: true } };
const words = (n: number, p: string) => Array.from({ length: n }, (_, i) => `${p}${i}`).join(' ');
/** Text without its whitespace: where an answer is split into messages, only the whitespace at the cut may go. */
const bare = (s: string) => s.replace(/\s+/g, '');

/** A reply in a channel thread to a message this process did not deliver (a turn run again after a restart). */
const NOT_DELIVERED_HERE = {
  channelId: 'sl',
  chatId: 'C0CHAN001',
  chatType: 'group' as const,
  threadId: '1700000000.000100',
  replyToMessageId: 'C0CHAN001:1700000000.000100',
};

describe('Slack native streams: the answer goes on when the stream cannot append it', () => {
  let sl: FakeSlack;
  let adapter: SlackAdapter;
  beforeEach(async () => {
    sl = await withSlack();
    sl.markdownText = true;
    // Slack does not document editing a message while it streams: a reply must not rely on it.
    sl.refuseUpdateWhileStreaming = true;
    adapter = slackAdapterOn(sl);
  });

  /** A reply streamed natively to a DM thread, tool progress shown; its errors collected. */
  function reply() {
    const errors: unknown[] = [];
    const stream = new ReplyStream({
      transport: adapter,
      capabilities: adapter.capabilities,
      target: { channelId: 'sl', chatId: 'D0DM0001', chatType: 'dm', threadId: '1700000000.000100' },
      streamMode: 'partial',
      showToolProgress: true,
      finalDeadlineMs: 60_000,
      signal: new AbortController().signal,
      onError: (err) => void errors.push(err),
    });
    return { stream, errors };
  }
  const appended = () => sl.callsOf('chat.appendStream').map((c) => c.args.markdown_text ?? '');
  const streamed = () => sl.messages.filter((m) => m.stream);

  // The progress line ("⏳ bash…") went into the append-only stream; the text after the tool
  // does not continue it. The stream was never stopped and the reply fell back to chat.update
  // on the message still streaming; refused, it posted the answer a second time.
  // Where Slack shows the tool as a task (chunks) the line never enters the text
  // (slack-stream-tasks.test.ts); a workspace that refuses chunks gets the line.
  it('a tool progress line (chunks refused), then more text: the stream is stopped and its message edited; the answer shows once', async () => {
    sl.refuseChunks = 'invalid_arguments';
    const { stream, errors } = reply();
    stream.push({ type: 'text_delta', text: 'Let me look.' });
    await waitFor(() => appended().length >= 1);
    stream.push({ type: 'tool_start', id: 't1', name: 'bash', input: {} });
    await waitFor(() => appended().some((t) => t.includes('⏳ bash')));
    stream.push({ type: 'tool_end', id: 't1', name: 'bash', output: 'ok' });
    stream.push({ type: 'text_delta', text: ' Found it.' });
    await waitFor(() => sl.texts('D0DM0001')[0] === 'Let me look. Found it.');
    stream.push(done);
    expect((await stream.finished()).delivered).toBe(true);
    expect(sl.texts('D0DM0001')).toEqual(['Let me look. Found it.']);
    expect(streamed().map((m) => m.stream!.stopped)).toEqual([true]);
    expect(errors).toEqual([]);
  });

  // chunkText cuts the first message at a paragraph, before the end of what was appended.
  it('an answer that outgrows one message: the stream is stopped at the cut; the rest is a second message, nothing twice', async () => {
    const { stream, errors } = reply();
    const first = `${'word '.repeat(99)}end.\n\n`.repeat(7) + 'x '.repeat(150);
    stream.push({ type: 'text_delta', text: first });
    await waitFor(() => appended().length >= 1);
    const rest = 'y '.repeat(300);
    stream.push({ type: 'text_delta', text: rest });
    stream.push(done);
    expect((await stream.finished()).delivered).toBe(true);
    const texts = sl.texts('D0DM0001');
    expect(texts).toHaveLength(2);
    expect(texts.every((t) => t.length <= adapter.capabilities.maxMessageLength)).toBe(true);
    expect(bare(texts.join(''))).toBe(bare(first + rest));
    expect(streamed().map((m) => m.stream!.stopped)).toEqual([true]);
    expect(errors).toEqual([]);
  });

  it('an append Slack fails (HTTP 500): the stream is stopped before the reply edits its message; the answer shows once', async () => {
    const { stream } = reply();
    stream.push({ type: 'text_delta', text: 'one ' });
    await waitFor(() => appended().length >= 1);
    sl.fail('chat.appendStream', { status: 500 });
    stream.push({ type: 'text_delta', text: 'two ' });
    await waitFor(() => sl.callsOf('chat.appendStream').length >= 2);
    stream.push({ type: 'text_delta', text: 'three' });
    stream.push(done);
    expect((await stream.finished()).delivered).toBe(true);
    expect(sl.texts('D0DM0001')).toEqual(['one two three']);
    expect(streamed().map((m) => m.stream!.stopped)).toEqual([true]);
  });
});

describe('Slack native streams in a channel', () => {
  // chat.startStream requires recipient_user_id and recipient_team_id outside DMs: without them
  // every channel reply failed its start, fell back, and after three streams were off.
  it('a mention streams to its sender (recipient user and team), with no fallback', async () => {
    const sl = await withSlack();
    await withChannelDaemon(echoAgent(100) + slackChannel(sl), slackEnv(sl));
    const mention = sl.mentionEvent(words(12, 'c'), { user: 'U0ASKER1' });
    sl.push(mention);
    await waitFor(() => sl.texts('C0CHAN001')[0] === words(12, 'c'), 15_000);
    expect(sl.callsOf('chat.startStream').map((c) => c.args)).toEqual([
      expect.objectContaining({ channel: 'C0CHAN001', thread_ts: mention.ts, recipient_user_id: 'U0ASKER1', recipient_team_id: 'T0001' }),
    ]);
    const [answer] = sl.messages.filter((m) => m.channel === 'C0CHAN001');
    expect(answer!.stream).toMatchObject({ stopped: true });
    expect(answer!.stream!.chunks.length).toBeGreaterThanOrEqual(2);
    expect(sl.callsOf('chat.postMessage')).toHaveLength(0);
    expect(sl.callsOf('chat.update')).toHaveLength(0);
  });

  it('a reply to a message this process did not deliver (a turn run again after a restart) starts no stream Slack would refuse', async () => {
    const sl = await withSlack();
    const adapter = slackAdapterOn(sl);
    expect(await adapter.openNativeStream(NOT_DELIVERED_HERE, { signal: new AbortController().signal })).toBeUndefined();
    expect(sl.callsOf('chat.startStream')).toHaveLength(0);
  });

  it("a reply to a message this process did not deliver, its sender known from the target, streams to that sender in the bot's workspace", async () => {
    const sl = await withSlack();
    const adapter = slackAdapterOn(sl, { listens: true });
    const ac = new AbortController();
    let connected!: () => void;
    const up = new Promise<void>((r) => (connected = r));
    const listening = adapter
      .listen(
        async () => true,
        ac.signal,
        () => connected(),
      )
      .catch(() => {});
    try {
      await up;
      const target = { ...NOT_DELIVERED_HERE, senderId: 'U0ASKER1' };
      // A turn run again after a restart, or on another cluster instance: before, it posted and edited.
      expect(await adapter.openNativeStream(target, { signal: ac.signal })).toBeDefined();
      expect(sl.callsOf('chat.startStream').map((c) => c.args)).toEqual([
        expect.objectContaining({ channel: 'C0CHAN001', recipient_user_id: 'U0ASKER1', recipient_team_id: 'T0001' }),
      ]);
    } finally {
      ac.abort();
      await listening;
    }
  });
});
