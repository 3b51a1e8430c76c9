import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { AgentEvent } from '../../../src/contracts/agent-events.js';
import type { NativeStream, NativeStreamOptions } from '../../../src/contracts/channel.js';
import { ChannelError } from '../../../src/contracts/errors.js';
import { NativeSlot } from '../../../src/stream/native-slot.js';
import { ToolProgressState } from '../../../src/stream/tool-progress.js';
import { RecordingAdapter } from '../../helpers/recording-adapter.js';
import { streamOn } from '../../helpers/reply-stream.js';

const done = { type: 'done', usage: { inputTokens: 0, outputTokens: 0, estimated: true } } as const;
const start = (id: string, name = 'search'): AgentEvent => ({ type: 'tool_start', id, name, input: {} });
const note = (id: string, text: string): AgentEvent => ({ type: 'tool_log', id, text });
const end = (id: string, error?: string): AgentEvent => ({ type: 'tool_end', id, name: 'search', ...(error ? { error } : {}) });

/** `update "text" [id state "note"]… @ms`: what one call on the stream carried, and when. */
function entry(op: string, text: string, o: NativeStreamOptions): string {
  const tasks = (o.progress ?? []).map((p) => ` [${p.id} ${p.state}${p.note ? ` "${p.note}"` : ''}]`).join('');
  return `${op} "${text}"${tasks} @${Date.now()}`;
}

/**
 * A native stream on `a` that records each call; it shows tool progress unless `shows` is false,
 * and with `refuse` rejects every call that carries progress with CHANNEL_PROGRESS_REFUSED.
 */
function recordingStream(a: RecordingAdapter, o: { shows?: boolean; refuse?: boolean } = {}) {
  const log: string[] = [];
  a.openNativeStream = async (): Promise<NativeStream> => ({
    ...(o.shows === false ? {} : { showsToolProgress: true as const }),
    update: async (text, opts) => {
      log.push(entry('update', text, opts));
      if (o.refuse && opts.progress) throw new ChannelError('CHANNEL_PROGRESS_REFUSED', 'refused');
    },
    finish: (text, opts) => {
      log.push(entry('finish', text, opts));
      return a.send({ channelId: 't', chatId: 'c', chatType: 'dm' }, text);
    },
  });
  return log;
}

describe('ReplyStream: a native stream that shows tool progress', () => {
  beforeEach(() => vi.useFakeTimers({ now: 0 }));
  afterEach(() => vi.useRealTimers());

  const adapter = () => new RecordingAdapter('t', { nativeStream: true, minEditIntervalMs: 100 });

  // Before: the progress line went into the text (`…\n\n⏳ search… page 3`) and no stream was told of any tool.
  it('gets each step’s tool changes with its text, coalesced, the line never in the text; the end reports the tool done', async () => {
    const a = adapter();
    const log = recordingStream(a);
    const s = streamOn(a, { showToolProgress: true });
    s.push({ type: 'text_delta', text: 'Looking. ' });
    await vi.advanceTimersByTimeAsync(10);
    s.push(start('c1'));
    await vi.advanceTimersByTimeAsync(100);
    for (let i = 1; i <= 5; i++) s.push(note('c1', `page ${i}`));
    await vi.advanceTimersByTimeAsync(100);
    s.push(end('c1'));
    s.push({ type: 'text_delta', text: 'Found it.' });
    s.push(done);
    await vi.runAllTimersAsync();
    expect((await s.finished()).delivered).toBe(true);
    expect(log).toEqual([
      'update "Looking. " @0',
      'update "Looking. " [c1 running] @100',
      'update "Looking. " [c1 running "page 5"] @200',
      'finish "Looking. Found it." [c1 done "page 5"] @300',
    ]);
    expect(a.visible('c')).toEqual(['Looking. Found it.']);
  });

  it('a tool first: the stream opens with no text and the task; a call started and ended between steps comes once, ended', async () => {
    const a = adapter();
    const log = recordingStream(a);
    const s = streamOn(a, { showToolProgress: true });
    s.push(start('c1'));
    await vi.advanceTimersByTimeAsync(10);
    s.push(end('c1'));
    s.push(start('c2', 'fetch'));
    s.push(end('c2', 'HTTP 404'));
    s.push({ type: 'text_delta', text: 'Gone.' });
    await vi.advanceTimersByTimeAsync(100);
    s.push(done);
    await vi.runAllTimersAsync();
    expect(log).toEqual(['update "" [c1 running] @0', 'update "Gone." [c1 done] [c2 failed] @100', 'finish "Gone." @200']);
  });

  it('the turn ends with a tool still running: the end reports it done, or failed when the turn failed', async () => {
    for (const [ending, last] of [
      [done, 'finish "Wait. " [c1 done] @100'],
      [{ type: 'error', code: 'TURN_FAILED', message: 'boom' }, 'finish "Wait.\n\n⚠️ boom" [c1 failed] @100'],
    ] as const) {
      vi.setSystemTime(0);
      const a = adapter();
      const log = recordingStream(a);
      const s = streamOn(a, { showToolProgress: true });
      s.push({ type: 'text_delta', text: 'Wait. ' });
      s.push(start('c1'));
      await vi.advanceTimersByTimeAsync(10);
      s.push(ending);
      await vi.runAllTimersAsync();
      expect(log).toEqual(['update "Wait. " [c1 running] @0', last]);
    }
  });

  it('a stream that refuses the progress: the same step again at once with the line in the text, and the line from then on', async () => {
    const a = adapter();
    const log = recordingStream(a, { refuse: true });
    const s = streamOn(a, { showToolProgress: true });
    s.push({ type: 'text_delta', text: 'Looking.' });
    await vi.advanceTimersByTimeAsync(10);
    s.push(start('c1'));
    await vi.advanceTimersByTimeAsync(100);
    s.push(note('c1', 'page 2'));
    await vi.advanceTimersByTimeAsync(100);
    s.push(end('c1'));
    s.push(done);
    await vi.runAllTimersAsync();
    expect((await s.finished()).delivered).toBe(true);
    expect(log).toEqual([
      'update "Looking." @0',
      'update "Looking." [c1 running] @100',
      'update "Looking.\n\n⏳ search…" @100',
      'update "Looking.\n\n⏳ search… page 2" @200',
      'finish "Looking." @300',
    ]);
  });

  it('a stream that does not show tool progress, and a reply without it: the line in the text, as before', async () => {
    const a = adapter();
    const log = recordingStream(a, { shows: false });
    const s = streamOn(a, { showToolProgress: true });
    s.push({ type: 'text_delta', text: 'Looking.' });
    await vi.advanceTimersByTimeAsync(10);
    s.push(start('c1'));
    s.push(note('c1', 'page 2'));
    await vi.advanceTimersByTimeAsync(100);
    s.push(end('c1'));
    s.push(done);
    await vi.runAllTimersAsync();
    expect(log).toEqual(['update "Looking." @0', 'update "Looking.\n\n⏳ search… page 2" @100', 'finish "Looking." @200']);

    vi.setSystemTime(0);
    const b = adapter();
    const off = recordingStream(b);
    const s2 = streamOn(b, { showToolProgress: false });
    s2.push({ type: 'text_delta', text: 'Looking.' });
    await vi.advanceTimersByTimeAsync(10);
    s2.push(start('c1'));
    await vi.advanceTimersByTimeAsync(100);
    s2.push(done);
    await vi.runAllTimersAsync();
    expect(off).toEqual(['update "Looking." @0', 'finish "Looking." @110']);
  });

  // Before: once c1 ended the line named no tool and c2's note was dropped: no step, and c2's task kept no note.
  it('parallel calls: a note of a call still running after another ended goes to the stream', async () => {
    const a = adapter();
    const log = recordingStream(a);
    const s = streamOn(a, { showToolProgress: true });
    s.push({ type: 'text_delta', text: 'Go. ' });
    await vi.advanceTimersByTimeAsync(10);
    s.push(start('c1'));
    s.push(start('c2', 'fetch'));
    await vi.advanceTimersByTimeAsync(100);
    s.push(end('c1'));
    await vi.advanceTimersByTimeAsync(100);
    s.push(note('c2', 'p2'));
    await vi.advanceTimersByTimeAsync(100);
    s.push(done);
    await vi.runAllTimersAsync();
    expect(log).toEqual([
      'update "Go. " @0',
      'update "Go. " [c1 running] [c2 running] @100',
      'update "Go. " [c1 done] @200',
      'update "Go. " [c2 running "p2"] @300',
      'finish "Go. " [c2 done "p2"] @400',
    ]);
  });
});

describe('ToolProgressState: a reply no stream of which shows the tools', () => {
  type ToolEvent = Parameters<ToolProgressState['push']>[0];
  const push = (t: ToolProgressState, e: AgentEvent) => t.push(e as ToolEvent);

  it('keeps no call states once told, drops what it had, and the line goes on as before', () => {
    const t = new ToolProgressState(true);
    for (const e of [start('c1'), start('c2'), note('c2', 'p'), end('c1')]) push(t, e);
    expect(t.kept).toBeGreaterThan(0);
    t.noStreamShows();
    expect(t.kept).toBe(0);
    expect(t.changes(true)).toBeUndefined();
    expect(push(t, start('c3', 'fetch'))).toBe(true);
    expect(t.line(false)).toBe('⏳ fetch…');
    expect(push(t, note('c3', 'page 2'))).toBe(true);
    expect(t.line(false)).toBe('⏳ fetch… page 2');
    push(t, end('c3'));
    // A note with no tool named and no stream to tell changes nothing shown (as before): no step.
    expect(push(t, note('c2', 'late'))).toBe(false);
    t.endAll(done);
    expect(t.kept).toBe(0);
    expect(t.changes(true)).toBeUndefined();
  });

  it('the native slot tells it when none can open, when the stream in use does not show tools, and when it is done', () => {
    let told = 0;
    new NativeSlot(false, () => told++);
    expect(told).toBe(1);
    const shows = new NativeSlot(true, () => told++);
    shows.stream = { showsToolProgress: true, finish: () => Promise.reject(new Error('unused')) };
    shows.state = 'active';
    expect(told).toBe(1);
    shows.state = 'off';
    expect(told).toBe(2);
    const plain = new NativeSlot(true, () => told++);
    plain.stream = { finish: () => Promise.reject(new Error('unused')) };
    plain.state = 'active';
    expect(told).toBe(3);
  });
});
