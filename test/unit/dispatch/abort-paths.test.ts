import { describe, expect, it } from 'vitest';
import { STOP_MARKER } from '../../../src/stream/reply-stream.js';
import { waitFor } from '../../helpers/daemon.js';
import { withPipeline, type Pipeline } from '../../helpers/pipeline.js';
import { RecordingAdapter, userMessage } from '../../helpers/recording-adapter.js';

// What happens to a turn while the platform does not answer: the abort signals the core
// passes to every transport call are what end it, so these tests hold calls in flight.

const slow = `[agent]\nprovider = "echo"\necho_delay_ms = 40\n`;
const words = 'one two three four five six seven eight nine ten';
const dm = (chat: string) => ({ chat: { id: chat, type: 'dm' as const } });

function states(p: Pipeline): string[] {
  return (p.db.prepare('SELECT state FROM inbox ORDER BY id').all() as { state: string }[]).map((r) => r.state);
}

const logged = (p: Pipeline, msg: string) => p.logs.entries().filter((e) => e.msg === msg);

describe('abort paths through the turn pipeline', () => {
  let p: Pipeline | undefined;

  it('a shutdown while the first send hangs: the hard stop cuts the send, the turn ends and the shutdown completes', async () => {
    p = withPipeline(slow);
    const held = p.adapter.hold((c) => c.op === 'send');
    await p.dispatcher.deliver(userMessage('t', words, dm('c1')));
    const call = await held.reached;
    expect(call.text).toBe('one ');
    // The grace passes with the send still hanging: the turn is cancelled, but its final
    // text waits on that send, so only the hard stop (at twice the grace) can end it.
    await p.close(50);
    const sink = p.logs;
    p = undefined;
    expect(sink.entries().some((e) => e.msg === 'the final reply could not be delivered')).toBe(true);
  });

  it('the hard stop rejects the hung call with its reason, and the lane is released', async () => {
    p = withPipeline(slow);
    const held = p.adapter.hold((c) => c.op === 'send');
    await p.dispatcher.deliver(userMessage('t', words, dm('c1')));
    await held.reached;
    p.hardStop.abort(new Error('exit now'));
    // The draft that hung failed with the hard stop's reason, as a real client's call would.
    await waitFor(() => logged(p!, 'reply request failed').length > 0);
    expect(logged(p, 'reply request failed')[0]!.err).toMatchObject({ message: 'exit now' });
    expect(p.adapter.aborted.map((c) => c.op)).toEqual(['send']);
    // Nothing reached the platform, and the turn let go of its lane once the agent finished.
    await waitFor(() => p!.dispatcher.snapshot().inFlight === 0);
    expect(p.adapter.calls.filter((c) => c.op === 'send')).toEqual([]);
    expect(p.dispatcher.snapshot()).toMatchObject({ inFlight: 0, queued: 0 });
    expect(logged(p, 'the final reply could not be delivered')).toHaveLength(1);
  });

  it('/stop while a send is slow: the turn ends with the stop marker once the platform answers, and the next message in that conversation is answered', async () => {
    p = withPipeline(slow);
    const held = p.adapter.hold((c) => c.op === 'send' && c.chatId === 'c1');
    await p.dispatcher.deliver(userMessage('t', words, dm('c1')));
    await held.reached;
    await p.dispatcher.deliver(userMessage('t', '/stop', dm('c1')));
    await p.dispatcher.deliver(userMessage('t', 'after the stop', dm('c1')));
    // The cancelled turn cannot finish while its send is in flight: the next one waits behind it.
    expect(p.dispatcher.snapshot()).toMatchObject({ inFlight: 1, queued: 1 });
    held.release();
    await waitFor(() => p!.adapter.visible('c1')[1] === 'after the stop');
    const [stopped] = p.adapter.visible('c1');
    expect(stopped!.endsWith(STOP_MARKER)).toBe(true);
    expect(stopped).not.toContain('ten');
    await waitFor(() => p!.dispatcher.snapshot().inFlight === 0);
    // The stopped turn, the /stop itself, the next message.
    expect(states(p)).toEqual(['failed', 'done', 'done']);
  });

  it("a lost lease (the scope's fence) cuts that conversation's hung send at once; another conversation is answered", async () => {
    const fence = new AbortController();
    p = withPipeline(slow, '', { executor: { fenceOf: (scope) => (scope === 't:c1' ? fence.signal : undefined) } });
    const held = p.adapter.hold((c) => c.op === 'send' && c.chatId === 'c1');
    await p.dispatcher.deliver(userMessage('t', words, dm('c1')));
    await held.reached;
    fence.abort(new Error('lease lost'));
    await waitFor(() => p!.adapter.aborted.length === 1);
    expect(p.adapter.aborted[0]).toMatchObject({ op: 'send', chatId: 'c1' });
    await p.dispatcher.deliver(userMessage('t', 'still here', dm('c2')));
    await waitFor(() => p!.adapter.visible('c2')[0] === 'still here');
    await waitFor(() => p!.dispatcher.snapshot().inFlight === 0);
    // The fenced instance wrote nothing more for c1: the one that took over continues it.
    expect(p.adapter.calls.filter((c) => c.chatId === 'c1')).toEqual([]);
  });

  it('a typing indicator that hangs does not hold the answer: it is cut by the hard stop at shutdown', async () => {
    const adapter = new RecordingAdapter('t', { typing: true, typingRefreshMs: 20 });
    // Slow enough that the turn is still running when typing starts (after TYPING_GRACE_MS),
    // and the answer shown only at the end (stream_mode final), so typing is what shows meanwhile.
    p = withPipeline(`[agent]\nprovider = "echo"\necho_delay_ms = 200\n`, 'stream_mode = "final"\n', { adapter });
    const typing = adapter.hold((c) => c.op === 'typing');
    await p.dispatcher.deliver(userMessage('t', words, dm('c1')));
    await typing.reached;
    // The answer goes out while the typing call is still hanging.
    await waitFor(() => adapter.visible('c1')[0] === words, 10_000);
    await p.close(50);
    p = undefined;
    expect(adapter.aborted.map((c) => c.op)).toContain('typing');
  });
});
