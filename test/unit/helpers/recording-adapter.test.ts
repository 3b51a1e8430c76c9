import { describe, expect, it } from 'vitest';
import type { MessageRef, ReplyTarget } from '../../../src/contracts/message.js';
import { RecordingAdapter, type Op } from '../../helpers/recording-adapter.js';

// The test platform must behave as a real client does under abort, or no test built on it
// can exercise an abort path: each call rejects with the signal's reason and never lands.

const target: ReplyTarget = { channelId: 't', chatId: 'c', chatType: 'dm' };
const ref: MessageRef = { chatId: 'c', messageId: 'm1' };
const file = { id: 'f1', type: 'document', name: 'a.txt' };

function full(): RecordingAdapter {
  return new RecordingAdapter('t', { nativeStream: true }, { finalize: true, reactions: true, files: { f1: Buffer.from('hello') }, nativeStream: true });
}

/** One call of each op, with `signal`. */
const calls: Record<Exclude<Op, 'draft'>, (a: RecordingAdapter, signal: AbortSignal) => Promise<unknown>> = {
  send: (a, signal) => a.send(target, 'x', { signal }),
  edit: (a, signal) => a.edit(ref, 'x', { signal }),
  delete: (a, signal) => a.delete(ref, { signal }),
  typing: (a, signal) => a.typing(target, { signal }),
  finalize: (a, signal) => a.finalize!([ref], { signal }),
  react: (a, signal) => a.setReaction!(ref, '👀', true, { signal }),
  'open-stream': (a, signal) => a.openNativeStream!(target, { signal }),
  download: (a, signal) => a.download!(file, { maxBytes: 100, signal }),
};

describe('RecordingAdapter honours abort signals', () => {
  for (const [op, call] of Object.entries(calls)) {
    it(`${op}: an already-aborted signal rejects with its reason and records nothing`, async () => {
      const a = full();
      const reason = new Error(`no ${op}`);
      await expect(call(a, AbortSignal.abort(reason))).rejects.toBe(reason);
      expect(a.calls).toEqual([]);
    });

    it(`${op}: an abort while the call is held rejects it promptly with the reason; it never lands`, async () => {
      const a = full();
      const held = a.hold(() => true);
      const ac = new AbortController();
      const pending = call(a, ac.signal);
      expect((await held.reached).op).toBe(op);
      const reason = new Error('cut');
      ac.abort(reason);
      await expect(pending).rejects.toBe(reason);
      expect(a.calls).toEqual([]);
      expect(a.aborted.map((c) => c.op)).toEqual([op]);
    });
  }

  it('a native stream update is cut by its signal too', async () => {
    const a = full();
    const ns = (await a.openNativeStream!(target, { signal: new AbortController().signal }))!;
    a.latency = () => new Promise(() => {});
    const ac = new AbortController();
    const pending = ns.update!('part', { signal: ac.signal });
    ac.abort(new Error('stop'));
    await expect(pending).rejects.toThrow('stop');
    expect(a.aborted.map((c) => c.op)).toEqual(['draft']);
  });

  it('a released hold lets the held call and later ones land', async () => {
    const a = full();
    const held = a.hold((c) => c.op === 'send');
    const first = a.send(target, 'first');
    await held.reached;
    expect(a.calls).toEqual([]);
    held.release();
    await first;
    await a.send(target, 'second');
    expect(a.visible('c')).toEqual(['first', 'second']);
  });

  it('without the options the optional parts are absent, as on a platform that has none', () => {
    const a = new RecordingAdapter('t');
    expect([a.finalize, a.setReaction, a.download, a.openNativeStream]).toEqual([undefined, undefined, undefined, undefined]);
  });

  it('download refuses a file over the limit before transferring it, and one whose bytes pass it', async () => {
    const a = new RecordingAdapter('t', {}, { files: { big: Buffer.alloc(10) } });
    const signal = new AbortController().signal;
    await expect(a.download!({ id: 'big', type: 'document', size: 10 }, { maxBytes: 5, signal })).rejects.toMatchObject({ code: 'ATTACHMENT_TOO_LARGE' });
    expect(a.calls).toEqual([]);
    await expect(a.download!({ id: 'big', type: 'document' }, { maxBytes: 5, signal })).rejects.toMatchObject({ code: 'ATTACHMENT_TOO_LARGE' });
    expect(await a.download!({ id: 'big', type: 'document' }, { maxBytes: 10, signal })).toHaveLength(10);
  });
});
