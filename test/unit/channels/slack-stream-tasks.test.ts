import { describe, expect, it } from 'vitest';
import type { SlackAdapter } from '../../../channels/slack/adapter.js';
import type { AgentEvent } from '../../../src/contracts/agent-events.js';
import type { ReplyTarget } from '../../../src/contracts/message.js';
import { ReplyStream } from '../../../src/stream/reply-stream.js';
import type { FakeSlack } from '../../fakes/slack/server.js';
import { waitFor } from '../../helpers/daemon.js';
import { slackAdapterOn, withSlack } from '../../helpers/platforms.js';

const done: AgentEvent = { type: 'done', usage: { inputTokens: 0, outputTokens: 0, estimated: true } };
const DM: ReplyTarget = { channelId: 'sl', chatId: 'D0DM0001', chatType: 'dm', threadId: '1700000000.000100' };
const start = (id: string, name = 'search'): AgentEvent => ({ type: 'tool_start', id, name, input: {} });

/** A reply streamed natively to a DM thread by the real Slack adapter, with tool progress on (`[[agents]] show_tool_progress`). */
function replyOn(adapter: SlackAdapter, signal = new AbortController().signal, maxMessageLength = adapter.capabilities.maxMessageLength): ReplyStream {
  return new ReplyStream({
    transport: adapter,
    capabilities: { ...adapter.capabilities, maxMessageLength },
    target: DM,
    streamMode: 'partial',
    showToolProgress: true,
    finalDeadlineMs: 60_000,
    signal,
  });
}

const streamed = (sl: FakeSlack) => sl.messages.filter((m) => m.stream);
const methods = (sl: FakeSlack) => sl.calls.map((c) => c.method);
/** Every stream call that carried chunks, as the chunks it carried. */
const chunkCalls = (sl: FakeSlack) =>
  sl.calls.filter((c) => c.args.chunks !== undefined).map((c) => JSON.parse(c.args.chunks!) as Array<Record<string, unknown>>);
const taskUpdates = (sl: FakeSlack) => chunkCalls(sl).flatMap((chunks) => chunks.filter((c) => c.type === 'task_update'));

describe('Slack native streams: a tool shows as a task and the answer streams to its end', () => {
  // Before: the progress line went into the streamed text, and once it changed (a note) or went
  // (the tool ended) the text no longer continued what Slack had: the stream was stopped at the
  // first tool and the rest of the answer was chat.update edits. No task was ever sent.
  it('text, a tool with many notes, more text: appends and one stop, no chat.update, the tool a complete task', async () => {
    const sl = await withSlack();
    const adapter = slackAdapterOn(sl);
    const stream = replyOn(adapter);
    stream.push({ type: 'text_delta', text: 'Let me look that up. ' });
    await waitFor(() => sl.callsOf('chat.appendStream').length === 1);
    stream.push(start('call_1'));
    await waitFor(() => streamed(sl)[0]?.tasks?.[0]?.status === 'in_progress');
    // Many notes between two steps: one task update carries the last.
    for (let i = 1; i <= 20; i++) stream.push({ type: 'tool_log', id: 'call_1', text: `page ${i}` });
    await waitFor(() => streamed(sl)[0]?.tasks?.[0]?.details === 'page 20');
    stream.push({ type: 'tool_end', id: 'call_1', name: 'search', output: 'found' });
    stream.push({ type: 'text_delta', text: 'It is **42**.' });
    stream.push(done);
    expect((await stream.finished()).delivered).toBe(true);
    await adapter.close();

    expect(sl.messages).toHaveLength(1);
    const [message] = sl.messages;
    expect(message!.text).toBe('Let me look that up. It is **42**.');
    expect(message!.stream!.stopped).toBe(true);
    expect(message!.tasks).toEqual([{ id: 'call_1', title: 'search', status: 'complete', details: 'page 20' }]);
    expect(methods(sl)).toEqual(['chat.startStream', 'chat.appendStream', 'chat.appendStream', 'chat.appendStream', 'chat.stopStream']);
    // One task update a step, however many notes came between two; the last text and the end in the one stop.
    expect(taskUpdates(sl).map((t) => [t.status, t.details])).toEqual([
      ['in_progress', undefined],
      ['in_progress', 'page 20'],
      ['complete', 'page 20'],
    ]);
    expect(chunkCalls(sl).at(-1)).toEqual([
      { type: 'markdown_text', text: 'It is **42**.' },
      { type: 'task_update', id: 'call_1', title: 'search', status: 'complete', details: 'page 20' },
    ]);
  });

  it('a tool that fails, started and ended between two steps: one task, shown once, as error', async () => {
    const sl = await withSlack();
    const adapter = slackAdapterOn(sl);
    const stream = replyOn(adapter);
    stream.push({ type: 'text_delta', text: 'Trying. ' });
    await waitFor(() => sl.callsOf('chat.appendStream').length === 1);
    stream.push(start('call_9', 'fetch_page'));
    stream.push({ type: 'tool_log', id: 'call_9', text: 'x'.repeat(300) });
    stream.push({ type: 'tool_end', id: 'call_9', name: 'fetch_page', error: 'HTTP 404' });
    stream.push({ type: 'text_delta', text: 'The page is gone.' });
    stream.push(done);
    expect((await stream.finished()).delivered).toBe(true);
    await adapter.close();
    const [message] = sl.messages;
    expect(message!.text).toBe('Trying. The page is gone.');
    // The note cut to Slack's 256 characters, with an ellipsis.
    expect(message!.tasks).toEqual([{ id: 'call_9', title: 'fetch_page', status: 'error', details: `${'x'.repeat(255)}…` }]);
    expect(taskUpdates(sl)).toHaveLength(1);
    expect(sl.callsOf('chat.update')).toEqual([]);
  });
});

describe('Slack native streams: a workspace that refuses chunks', () => {
  it('the refused step goes again at once with the progress line in the text: nothing lost or doubled, one message, chunks never tried again', async () => {
    const sl = await withSlack();
    sl.refuseChunks = 'invalid_arguments';
    const adapter = slackAdapterOn(sl);
    const stream = replyOn(adapter);
    stream.push({ type: 'text_delta', text: 'One. ' });
    await waitFor(() => sl.callsOf('chat.appendStream').length === 1);
    // New text and the tool in one step: the text part of the refused call must still go, once.
    stream.push({ type: 'text_delta', text: 'Two. ' });
    stream.push(start('call_1'));
    await waitFor(() => streamed(sl)[0]?.text.includes('⏳'));
    stream.push({ type: 'tool_end', id: 'call_1', name: 'search', output: 'found' });
    stream.push({ type: 'text_delta', text: 'Three.' });
    stream.push(done);
    expect((await stream.finished()).delivered).toBe(true);

    expect(sl.messages).toHaveLength(1);
    const [message] = sl.messages;
    // Today's behaviour from then on: the line in the streamed text, and when it goes the stream is
    // stopped and the message edited (markdown_text refused by this fake, then mrkdwn).
    expect(message!.stream!.chunks).toEqual(['One. ', 'Two. \n\n⏳ search…']);
    expect(message!.text).toBe('One. Two. Three.');
    expect(message!.tasks).toBeUndefined();
    expect(chunkCalls(sl)).toEqual([
      [
        { type: 'markdown_text', text: 'Two. ' },
        { type: 'task_update', id: 'call_1', title: 'search', status: 'in_progress' },
      ],
    ]);
    expect(methods(sl)).toEqual([
      'chat.startStream',
      'chat.appendStream',
      'chat.appendStream',
      'chat.appendStream',
      'chat.stopStream',
      'chat.update',
      'chat.update',
    ]);
    // The channel remembers: its next stream does not offer to show tool progress.
    const next = await adapter.openNativeStream(DM, { signal: new AbortController().signal });
    expect(next?.showsToolProgress).toBeUndefined();
    next?.release?.();
    await adapter.close();
  });

  it('malformed chunks are refused by the fake as Slack does (invalid_arguments), and taken when well formed', async () => {
    const sl = await withSlack();
    const api = `${sl.apiUrl}chat.`;
    const post = async (method: string, args: Record<string, string>) =>
      (await (
        await fetch(`${api}${method}`, { method: 'POST', headers: { authorization: `Bearer ${sl.botToken}` }, body: new URLSearchParams(args) })
      ).json()) as {
        ok: boolean;
        error?: string;
        ts?: string;
      };
    const started = await post('startStream', { channel: 'D0DM0001', thread_ts: '1.1', chunks: JSON.stringify([{ type: 'markdown_text', text: 'a' }]) });
    expect(started.ok).toBe(true);
    const at = { channel: 'D0DM0001', ts: started.ts! };
    const task = { type: 'task_update', id: 't1', title: 'search', status: 'in_progress' };
    for (const bad of [
      'nope',
      '[]',
      JSON.stringify([{ ...task, status: 'running' }]),
      JSON.stringify([{ ...task, details: 'x'.repeat(257) }]),
      JSON.stringify([{ type: 'x' }]),
    ])
      expect(await post('appendStream', { ...at, chunks: bad })).toEqual({ ok: false, error: 'invalid_arguments' });
    expect((await post('appendStream', { ...at, chunks: JSON.stringify([task]) })).ok).toBe(true);
    expect(
      (
        await post('stopStream', {
          ...at,
          chunks: JSON.stringify([
            { type: 'markdown_text', text: 'b' },
            { ...task, status: 'complete' },
          ]),
        })
      ).ok,
    ).toBe(true);
    expect(sl.messages.map((m) => [m.text, m.tasks])).toEqual([['ab', [{ id: 't1', title: 'search', status: 'complete' }]]]);
  });
});

describe('Slack native streams: a stream that ends otherwise than by its final leaves no task in progress', () => {
  // Before: only the reply's continuing final closed a task; every other stop (a cut, the answer
  // outgrowing the message, a failure) went without chunks and Slack showed the tool running for ever.
  /** Text streamed, then a tool started and shown as a task in progress. */
  async function toolRunning(sl: FakeSlack, signal?: AbortSignal, maxMessageLength?: number) {
    const adapter = slackAdapterOn(sl);
    const stream = replyOn(adapter, signal, maxMessageLength);
    stream.push({ type: 'text_delta', text: 'Let me look that up.\n\n' });
    await waitFor(() => sl.callsOf('chat.appendStream').length === 1);
    stream.push(start('call_1'));
    await waitFor(() => streamed(sl)[0]?.tasks?.[0]?.status === 'in_progress');
    return { adapter, stream };
  }

  it('the reply cut by its signal while a tool runs: the abandoned stop closes the task as error', async () => {
    const sl = await withSlack();
    const cut = new AbortController();
    const { adapter, stream } = await toolRunning(sl, cut.signal);
    cut.abort();
    stream.push({ type: 'cancelled' });
    expect((await stream.finished()).delivered).toBe(false);
    await waitFor(() => streamed(sl)[0]!.stream!.stopped);
    await adapter.close();
    const [message] = streamed(sl);
    expect(message!.tasks).toEqual([{ id: 'call_1', title: 'search', status: 'error' }]);
    expect(sl.callsOf('chat.stopStream')).toHaveLength(1);
    expect(message!.text).toBe('Let me look that up.\n\n');
  });

  it('the answer outgrows one message while a tool runs: the first message stops with its task complete', async () => {
    const sl = await withSlack();
    const { adapter, stream } = await toolRunning(sl, undefined, 120);
    stream.push({ type: 'text_delta', text: 'x'.repeat(150) });
    await waitFor(() => sl.messages.length === 2);
    stream.push({ type: 'tool_end', id: 'call_1', name: 'search', output: 'found' });
    stream.push(done);
    expect((await stream.finished()).delivered).toBe(true);
    await adapter.close();
    const [first] = streamed(sl);
    expect(first!.stream!.stopped).toBe(true);
    expect(first!.tasks).toEqual([{ id: 'call_1', title: 'search', status: 'complete' }]);
    expect(sl.messages.flatMap((m) => m.tasks ?? []).filter((t) => t.status === 'in_progress')).toEqual([]);
  });

  it('a workspace that refuses chunks by the time the stream is cut: the stop still goes, without them', async () => {
    const sl = await withSlack();
    const cut = new AbortController();
    const { adapter, stream } = await toolRunning(sl, cut.signal);
    sl.refuseChunks = 'invalid_arguments';
    cut.abort();
    stream.push({ type: 'cancelled' });
    await stream.finished();
    await waitFor(() => streamed(sl)[0]!.stream!.stopped);
    await adapter.close();
    const stops = sl.callsOf('chat.stopStream');
    // The stop with the closing chunk refused, then the same stop without chunks, taken.
    expect(stops.map((c) => c.args.chunks !== undefined)).toEqual([true, false]);
    expect(streamed(sl)[0]!.stream!.stopped).toBe(true);
  });
});

describe('Slack native streams: a stop Slack fails keeps what the tasks were and still ends the stream', () => {
  // Before: the stop after a failed final sent only closings, so a call that ended done showed as failed.
  it("finish's stop fails (internal_error): the stop after it carries the reply's states, the task that ended done complete", async () => {
    const sl = await withSlack();
    const adapter = slackAdapterOn(sl);
    const stream = replyOn(adapter);
    stream.push({ type: 'text_delta', text: 'Let me look. ' });
    await waitFor(() => sl.callsOf('chat.appendStream').length === 1);
    stream.push(start('call_1'));
    await waitFor(() => streamed(sl)[0]?.tasks?.[0]?.status === 'in_progress');
    sl.fail('chat.stopStream', { error: 'internal_error' });
    // The end of the call goes only in finish's stop (as in the first case above).
    stream.push({ type: 'tool_end', id: 'call_1', name: 'search', output: 'found' });
    stream.push({ type: 'text_delta', text: 'It is 42.' });
    stream.push(done);
    await stream.finished();
    await adapter.close();
    const [message] = streamed(sl);
    expect(sl.callsOf('chat.stopStream')).toHaveLength(2);
    expect(message!.stream!.stopped).toBe(true);
    expect(message!.tasks).toEqual([{ id: 'call_1', title: 'search', status: 'complete' }]);
  });

  // Before: only a chunk refusal sent the abandoned stop again without its closings; any other
  // rejection lost the stop and the message streamed until Slack expired it.
  for (const fault of [{ error: 'invalid_blocks' }, { status: 500 }] as const)
    it(`the abandoned stop with a closing answered ${JSON.stringify(fault)}: sent again without chunks, the message stopped`, async () => {
      const sl = await withSlack();
      const cut = new AbortController();
      const adapter = slackAdapterOn(sl);
      const stream = replyOn(adapter, cut.signal);
      stream.push({ type: 'text_delta', text: 'Let me look that up.\n\n' });
      await waitFor(() => sl.callsOf('chat.appendStream').length === 1);
      stream.push(start('call_1'));
      await waitFor(() => streamed(sl)[0]?.tasks?.[0]?.status === 'in_progress');
      sl.fail('chat.stopStream', fault);
      cut.abort();
      stream.push({ type: 'cancelled' });
      await stream.finished();
      await waitFor(() => streamed(sl)[0]!.stream!.stopped);
      expect(sl.callsOf('chat.stopStream').map((c) => c.args.chunks !== undefined)).toEqual([true, false]);
      // Not a chunk refusal: the workspace still shows tool progress as tasks.
      const next = await adapter.openNativeStream(DM, { signal: new AbortController().signal });
      expect(next?.showsToolProgress).toBe(true);
      next?.release?.();
      await adapter.close();
    });
});
