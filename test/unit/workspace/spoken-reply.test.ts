import { describe, expect, it } from 'vitest';
import type { OutgoingFile, TransportOptions } from '../../../src/contracts/channel.js';
import type { MessageRef, ReplyTarget } from '../../../src/contracts/message.js';
import type { Speaker } from '../../../src/media/speak.js';
import { createLogger } from '../../../src/observe/logger.js';
import { sendSpokenReply } from '../../../src/workspace/spoken-reply.js';
import { LogSink, waitFor } from '../../helpers/daemon.js';

const target: ReplyTarget = { channelId: 'tg', chatId: '42', chatType: 'dm' };

/** A platform that can send files: all sendSpokenReply uses of an adapter. It records each upload. */
function platform() {
  const sent: Array<{ target: ReplyTarget; file: OutgoingFile }> = [];
  const adapter = {
    sendFile: async (t: ReplyTarget, file: OutgoingFile, o: TransportOptions): Promise<MessageRef> => {
      o.signal?.throwIfAborted();
      sent.push({ target: t, file });
      return { chatId: t.chatId, messageId: `v${sent.length}` };
    },
  };
  return { adapter, sent };
}

/** The speech model: fixed bytes, and whether it was asked. */
function speaker() {
  const spoken: string[] = [];
  const speak: Speaker = async (text) => {
    spoken.push(text);
    return { bytes: Buffer.from('OggS-fixed'), mime: 'audio/ogg', name: 'answer.ogg' };
  };
  return { speak, spoken };
}

/** A store that does not take writes until `recover()`; like whenWritable, an abort ends the wait with false. */
function storage() {
  const waits: AbortSignal[] = [];
  let recover!: () => void;
  const recovered = new Promise<void>((r) => (recover = r));
  const beforeSend = (signal: AbortSignal) => {
    waits.push(signal);
    return new Promise<boolean>((resolve) => {
      signal.addEventListener('abort', () => resolve(false), { once: true });
      void recovered.then(() => resolve(true));
    });
  };
  return { beforeSend, waits, recover: () => recover() };
}

describe('sendSpokenReply', () => {
  it('makes the speech at once but sends the voice note only once the store takes writes', async () => {
    const { adapter, sent } = platform();
    const { speak, spoken } = speaker();
    const store = storage();
    const logs = new LogSink();
    const done = sendSpokenReply({
      adapter,
      target,
      text: 'Sunny and warm.',
      speaker: speak,
      signal: new AbortController().signal,
      log: createLogger({ level: 'info', destination: logs }),
      where: { channel: 'tg' },
      beforeSend: store.beforeSend,
    });
    await waitFor(() => store.waits.length === 1 || sent.length > 0);
    expect(sent).toEqual([]);
    // Synthesis is not held back by the outage; the upload is.
    expect(spoken).toEqual(['Sunny and warm.']);
    store.recover();
    expect(await done).toBe(true);
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({ target, file: { mime: 'audio/ogg', name: 'answer.ogg', voice: true } });
    expect(sent[0]!.file.bytes.toString()).toBe('OggS-fixed');
    expect(logs.entries().map((l) => l.msg)).toEqual(['spoken reply sent']);
  });

  it('stopped while it waits for the store: no voice note, one warning, false', async () => {
    const { adapter, sent } = platform();
    const { speak } = speaker();
    const store = storage();
    const logs = new LogSink();
    const stop = new AbortController();
    const done = sendSpokenReply({
      adapter,
      target,
      text: 'Rain.',
      speaker: speak,
      signal: stop.signal,
      log: createLogger({ level: 'info', destination: logs }),
      where: { channel: 'tg' },
      beforeSend: store.beforeSend,
    });
    await waitFor(() => store.waits.length === 1 || sent.length > 0);
    expect(sent).toEqual([]);
    stop.abort();
    expect(await done).toBe(false);
    // The wait had the reply's own signal (the turn's, with its deadline).
    expect(store.waits[0]!.aborted).toBe(true);
    store.recover();
    expect(sent).toEqual([]);
    expect(logs.entries().map((l) => ({ level: l.level, msg: l.msg }))).toEqual([{ level: 40, msg: 'spoken reply not sent; the answer went as text only' }]);
  });
});
