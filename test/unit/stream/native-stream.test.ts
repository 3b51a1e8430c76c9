import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { NativeStream } from '../../../src/contracts/channel.js';
import { ChannelError } from '../../../src/contracts/errors.js';
import type { MessageRef } from '../../../src/contracts/message.js';
import { FirstVisibleFirst } from '../../../src/stream/first-visible.js';
import { RecordingAdapter } from '../../helpers/recording-adapter.js';
import { streamOn } from '../../helpers/reply-stream.js';

const done = { type: 'done', usage: { inputTokens: 0, outputTokens: 0, estimated: true } } as const;

/** The platform calls of `a` but typing, as [op, when it started]. */
const sends = (a: RecordingAdapter) => a.calls.filter((c) => c.op !== 'typing').map((c) => [c.op, c.startedAt]);

/** A native stream that shows nothing before its end, as XMPP's in a room: its end is one new message. */
function silentStream(a: RecordingAdapter): void {
  a.openNativeStream = async (target): Promise<NativeStream> => ({ finish: (text, o) => a.send(target, text, o), finishSendsMessage: true });
}

describe('ReplyStream with a native stream', () => {
  beforeEach(() => vi.useFakeTimers({ now: 0 }));
  afterEach(() => vi.useRealTimers());

  // An XMPP room (or a client without corrections) shows nothing until the end. Its reply
  // sends no drafts, keeps its user's typing up, holds no other reply's drafts behind
  // FirstVisibleFirst, and sends the whole text the moment the turn ends, not a floor after
  // a draft that showed nothing (the stub's no-op update put it at 2,200 and stopped typing).
  it('a stream that shows nothing before its end drafts nothing, keeps typing, holds no one, and ends at once', async () => {
    const gate = new FirstVisibleFirst();
    const a = new RecordingAdapter('t', { nativeStream: true, minEditIntervalMs: 1000, typing: true, typingRefreshMs: 500 });
    silentStream(a);
    const other = new RecordingAdapter('o', { minEditIntervalMs: 1000 });
    const s = streamOn(a, { firstVisible: gate });
    const o = streamOn(other, { firstVisible: gate });
    s.push({ type: 'text_delta', text: 'one ' });
    o.push({ type: 'text_delta', text: 'a ' });
    await vi.advanceTimersByTimeAsync(1200);
    s.push({ type: 'text_delta', text: 'two ' });
    o.push({ type: 'text_delta', text: 'b' });
    await vi.advanceTimersByTimeAsync(50);
    s.push({ type: 'text_delta', text: 'three' });
    s.push(done);
    o.push(done);
    await vi.runAllTimersAsync();
    const r = await s.finished();
    expect(sends(a)).toEqual([['send', 1250]]);
    // The open and the end: no draft.
    expect([r.requests, r.delivered]).toEqual([2, true]);
    expect(a.visible('c')).toEqual(['one two three']);
    // Typing from its grace (300 ms) every refresh until the end: the user saw the bot at work.
    expect(a.calls.filter((c) => c.op === 'typing').map((c) => c.startedAt)).toEqual([300, 800]);
    // The other reply's draft edit went at its floor, held by nobody.
    expect(sends(other)).toEqual([
      ['send', 0],
      ['edit', 1200],
    ]);
  });

  /** A store that takes writes until `down()`, and again after `up()`: beforeSend waits meanwhile. */
  function store() {
    let writable: Promise<void> = Promise.resolve();
    let up = () => {};
    return {
      beforeSend: () => writable,
      down: () => void (writable = new Promise<void>((r) => (up = r))),
      up: () => up(),
    };
  }

  // A new message goes only once its id can be stored (beforeSend: the store takes writes),
  // or a process restarted before the store recovers would send the answer again. A native
  // stream's open (Slack's chat.startStream posts the message) and its end (Telegram's and
  // XMPP's are a new message) are such messages too.
  it("waits for the store before a native stream's open and before its end", async () => {
    const a = new RecordingAdapter('t', { nativeStream: true, minEditIntervalMs: 1000 }, { nativeStream: true });
    const st = store();
    const s = streamOn(a, { beforeSend: st.beforeSend });
    st.down();
    s.push({ type: 'text_delta', text: 'hello' });
    await vi.advanceTimersByTimeAsync(4000);
    expect(sends(a)).toEqual([]);
    st.up();
    await vi.advanceTimersByTimeAsync(500);
    expect(sends(a)).toEqual([
      ['open-stream', 4000],
      ['draft', 4000],
    ]);
    st.down();
    s.push({ type: 'text_delta', text: ' there' });
    s.push(done);
    await vi.advanceTimersByTimeAsync(3500);
    expect(sends(a)).toHaveLength(2);
    st.up();
    await vi.runAllTimersAsync();
    expect((await s.finished()).delivered).toBe(true);
    expect(sends(a)[2]).toEqual(['send', 8000]);
    expect(a.visible('c')).toEqual(['hello there']);
  });

  // The turn ended while the store was away: there is nothing left to stream, so no stream is
  // opened only to be finished (on Slack three requests for one message).
  it('a turn that ends while the store is away opens no stream: its text goes as one message', async () => {
    const a = new RecordingAdapter('t', { nativeStream: true, minEditIntervalMs: 1000 }, { nativeStream: true });
    const st = store();
    const s = streamOn(a, { beforeSend: st.beforeSend });
    st.down();
    s.push({ type: 'text_delta', text: 'hello' });
    await vi.advanceTimersByTimeAsync(1000);
    s.push({ type: 'text_delta', text: ' there' });
    s.push(done);
    await vi.advanceTimersByTimeAsync(4000);
    st.up();
    await vi.runAllTimersAsync();
    const r = await s.finished();
    expect([r.delivered, r.requests]).toEqual([true, 1]);
    expect(a.calls.map((c) => [c.op, c.text, c.startedAt])).toEqual([['send', 'hello there', 5000]]);
  });

  // Slack's chat.startStream posts the message. Its id is stored at once, so a turn run again
  // after a crash edits it; and where the stream then fails (expired on the server) the reply
  // goes on by editing that message, not by posting a second one under the half-written first.
  it('stores the message a stream posted at its open, and edits it when the stream fails', async () => {
    const a = new RecordingAdapter('t', { nativeStream: true, minEditIntervalMs: 1000 });
    let appends = 0;
    a.openNativeStream = async (target, o): Promise<NativeStream> => {
      const ref = await a.send(target, '', o);
      return {
        ref,
        update: async (text) => {
          if (++appends > 1) throw new ChannelError('CHANNEL_REQUEST_FAILED', 'Slack: message_not_in_streaming_state');
          a.texts.set(ref.messageId, text);
        },
        finish: async () => ref,
      };
    };
    const stored: MessageRef[][] = [];
    const s = streamOn(a, { onRefs: (refs) => stored.push(refs) });
    s.push({ type: 'text_delta', text: 'one ' });
    await vi.advanceTimersByTimeAsync(0);
    expect(stored).toEqual([[{ chatId: 'c', messageId: 'out-1' }]]);
    await vi.advanceTimersByTimeAsync(1000);
    s.push({ type: 'text_delta', text: 'two' });
    await vi.advanceTimersByTimeAsync(1000);
    s.push(done);
    await vi.runAllTimersAsync();
    expect((await s.finished()).delivered).toBe(true);
    expect(a.visible('c')).toEqual(['one two']);
    expect(sends(a).map(([op]) => op)).toEqual(['send', 'edit']);
  });

  // Teams names its streamed message in the answer to the first chunk: the reply stores it
  // then (once), so a turn run again edits it, and a stream past Teams' limit goes on in it.
  it('stores the message a stream names after its first chunk, once, and edits it when the stream ends early', async () => {
    const a = new RecordingAdapter('t', { nativeStream: true, minEditIntervalMs: 1000 });
    let chunks = 0;
    a.openNativeStream = async (target, o): Promise<NativeStream> => {
      let ref: MessageRef | undefined;
      return {
        get ref() {
          return ref;
        },
        update: async (text) => {
          if (++chunks > 2) throw new ChannelError('CHANNEL_FORBIDDEN', 'Teams: Content stream finished due to exceeded streaming time.');
          if (ref) a.texts.set(ref.messageId, text);
          else ref = await a.send(target, text, o);
        },
        finish: async () => ref!,
      };
    };
    const stored: MessageRef[][] = [];
    const s = streamOn(a, { onRefs: (refs) => stored.push(refs) });
    s.push({ type: 'text_delta', text: 'one ' });
    await vi.advanceTimersByTimeAsync(0);
    expect(stored).toEqual([[{ chatId: 'c', messageId: 'out-1' }]]);
    await vi.advanceTimersByTimeAsync(1000);
    s.push({ type: 'text_delta', text: 'two ' });
    await vi.advanceTimersByTimeAsync(1000);
    // The second chunk went into the same message: nothing new to store.
    expect(chunks).toBe(2);
    expect(stored).toHaveLength(1);
    s.push({ type: 'text_delta', text: 'three' });
    await vi.advanceTimersByTimeAsync(1000);
    s.push(done);
    await vi.runAllTimersAsync();
    expect((await s.finished()).delivered).toBe(true);
    expect(a.visible('c')).toEqual(['one two three']);
    expect(sends(a).map(([op]) => op)).toEqual(['send', 'edit']);
  });
  // Teams' Stop button: the stream's next request is refused "cancelled by user". The reply used
  // to fall back to messages, so an answer that outgrew one message (or a reply with no message
  // to answer, as a reminder's) went on as new messages after the Stop.
  it('a stream its user stopped (REPLY_STOPPED_BY_USER) sends nothing more of the answer, in any form', async () => {
    const a = new RecordingAdapter('t', { nativeStream: true, minEditIntervalMs: 1000, maxMessageLength: 50 });
    const updates: string[] = [];
    const ref: MessageRef = { chatId: 'c', messageId: 'streamed' };
    a.openNativeStream = async (): Promise<NativeStream> => ({
      get ref() {
        return updates.length ? ref : undefined;
      },
      update: async (text) => {
        if (updates.length) throw new ChannelError('REPLY_STOPPED_BY_USER', 'the user pressed Stop');
        updates.push(text);
      },
      finish: async (_text, o) => {
        if (!o.final) throw new ChannelError('REPLY_STOPPED_BY_USER', 'the user pressed Stop');
        return ref;
      },
    });
    const errors: string[] = [];
    const s = streamOn(a, { onError: (err) => errors.push(err instanceof ChannelError ? err.code : String(err)) });
    s.push({ type: 'text_delta', text: 'first words ' });
    await vi.advanceTimersByTimeAsync(1100);
    s.push({ type: 'text_delta', text: 'and more' });
    await vi.advanceTimersByTimeAsync(1100);
    s.push({ type: 'text_delta', text: ', then a great many words that outgrow one message of fifty characters' });
    await vi.advanceTimersByTimeAsync(3000);
    s.push(done);
    await vi.runAllTimersAsync();
    const r = await s.finished();
    expect(updates).toEqual(['first words ']);
    expect(errors).toEqual(['REPLY_STOPPED_BY_USER']);
    expect(sends(a)).toEqual([]);
    expect(r.delivered).toBe(true);
  });
});
