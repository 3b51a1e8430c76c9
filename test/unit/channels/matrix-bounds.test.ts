import { beforeEach, describe, expect, it } from 'vitest';
import { INVITES_REMEMBERED, type MatrixAdapter } from '../../../channels/matrix/adapter.js';
import { ChannelError } from '../../../src/contracts/errors.js';
import type { ChannelMessage } from '../../../src/contracts/message.js';
import { SupervisedChannel } from '../../../src/supervisor/channel.js';
import { waitFor } from '../../helpers/daemon.js';
import { matrixFixture } from '../../helpers/matrix.js';

/** A Matrix event holds at most 64 KiB: a long message near that. */
const LONG = 'x'.repeat(60_000);

describe('Matrix: bounded /sync answers and invite memory', () => {
  const f = matrixFixture('matrix-bounds');
  const { delivered, deliver, logged, awayFromStart } = f;
  let adapter: MatrixAdapter;
  /** The timeline limit of every /sync the adapter asked, in order. */
  const limits = () => f.mx.callsOf('sync').map((c) => JSON.parse(c.query.filter!).room.timeline.limit as number);

  beforeEach(() => {
    adapter = f.adapter();
  });

  it('a /sync answer over 8 MiB is asked for again with half the timeline, read, and the next /sync is full size again', async () => {
    awayFromStart();
    // A busy account: four rooms of long messages, more than one 50-event answer can hold.
    const busy = ['!busy1:fake.test', '!busy2:fake.test', '!busy3:fake.test'];
    for (const room of busy) f.mx.joinRoom(room);
    for (let i = 0; i < 50; i++) for (const room of [f.mx.groupRoom, ...busy]) f.mx.post(room, { msgtype: 'm.text', body: LONG });
    f.mx.group('are you there?', { mention: true });

    const run = f.listen(adapter);
    await waitFor(() => run.failure ?? delivered.some((m) => m.text.endsWith('are you there?')), 20_000);
    expect(run.failure).toBeUndefined();
    // Every event of the served room: the latest 25 in the answer, the 26 it left out read back
    // over /messages, oldest first; the unserved rooms fill the answer but are not read.
    expect(delivered).toHaveLength(51);
    expect(delivered.every((m) => m.chat.id === f.mx.groupRoom)).toBe(true);
    expect(delivered.at(-1)?.text).toMatch(/are you there\?$/);
    expect(f.mx.callsOf('messages').map((c) => c.path)).toEqual([
      `/_matrix/client/v3/rooms/${encodeURIComponent(f.mx.groupRoom)}/messages`,
      expect.any(String),
    ]);
    await waitFor(() => limits().length >= 3, 10_000);
    expect(limits().slice(0, 3)).toEqual([50, 25, 50]);
    expect(logged('Matrix /sync answer too large; asking again with fewer events per room')).toMatchObject([
      { level: 40, timelineLimit: 50, nextTimelineLimit: 25 },
    ]);
    // The messages the smaller answer left out are read back, not skipped.
    expect(logged('Matrix read back the messages a limited /sync left out')).toMatchObject([{ level: 30, room: f.mx.groupRoom, events: 26 }]);
    expect(logged('Matrix /sync caught up; back to the full size')).toHaveLength(1);

    f.mx.dm('and now?');
    await waitFor(() => run.failure ?? delivered.some((m) => m.text === 'and now?'), 10_000);
    expect(run.failure).toBeUndefined();
    expect(new Set(limits().slice(2))).toEqual(new Set([50]));
  });

  it('too large even at one event per room: a logged, retryable failure that backs off and asks again at the floor', async () => {
    awayFromStart();
    f.mx.dm('hello after a long time');
    // The ladder 50, 25, 12, 6, 3, 1, then two more retries at the floor before the answer fits.
    f.mx.fail('sync', { oversized: true }, 8);
    const supervised = new SupervisedChannel({
      id: 'mx',
      kind: 'matrix',
      adapter,
      deliver,
      backoff: { initial_ms: 10, factor: 2, max_ms: 50, stable_ms: 300_000 },
      connectTimeoutMs: 10_000,
      log: f.log(),
    });
    supervised.start();
    try {
      await waitFor(() => delivered.some((m) => m.text === 'hello after a long time'), 20_000);
      expect(limits().slice(0, 9)).toEqual([50, 25, 12, 6, 3, 1, 1, 1, 1]);
      const backoffs = logged('channel mx backing off');
      expect(backoffs).toHaveLength(3);
      for (const b of backoffs) {
        expect(b.level).toBe(40);
        expect(b.error).toMatchObject({
          code: 'CHANNEL_REQUEST_FAILED',
          message: expect.stringContaining(`Matrix sync: the answer is larger than ${8 * 1024 * 1024} bytes even at 1 event per room; retrying with backoff`),
        });
      }
      expect(supervised.status().state).toBe('connected');
      expect(logged('Matrix /sync caught up; back to the full size')).toHaveLength(1);
      await waitFor(() => limits().length >= 10, 10_000);
      expect(limits()[9]).toBe(50);
    } finally {
      await supervised.stop(5000);
    }
  });

  it('the floor failure is a retryable ChannelError, not a parked channel', async () => {
    awayFromStart();
    f.mx.dm('hello');
    f.mx.fail('sync', { oversized: true }, 6);
    const failure = await adapter
      .listen(deliver, f.stop.signal, () => {})
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    expect(failure).toBeInstanceOf(ChannelError);
    expect(failure).toMatchObject({ code: 'CHANNEL_REQUEST_FAILED', retryable: true });
  });

  it(`remembers at most ${INVITES_REMEMBERED} handled invites: a repeated batch re-acts on none inside the bound, only on the oldest past it`, async () => {
    let failure: unknown;
    let failNext = false;
    const flaky = async (m: ChannelMessage) => {
      if (failNext) {
        failNext = false;
        throw new ChannelError('CHANNEL_UNAVAILABLE', 'the inbox could not take the batch');
      }
      return deliver(m);
    };
    let connectedCount = 0;
    const connected = () => {
      connectedCount++;
    };
    adapter.listen(flaky, f.stop.signal, connected).catch((err) => (failure = err));
    await waitFor(() => connectedCount === 1 && f.mx.callsOf('sync').length >= 2);

    // A federated invite spam, and in the same batch a message whose delivery fails: the batch
    // is not stored, so the next run reads it again, invites and all.
    const over = 10;
    const spam = Array.from({ length: INVITES_REMEMBERED + over }, (_, i) => `!spam${i}:evil.test`);
    failNext = true;
    for (const room of spam) f.mx.invite(room, '@mallory:evil.test', false);
    f.mx.dm('hi');
    const refused = () => logged('Matrix invite not accepted');
    await waitFor(() => failure);
    expect(refused()).toHaveLength(spam.length);

    // The supervisor runs the listener again (same adapter): the same batch comes back.
    failure = undefined;
    adapter.listen(flaky, f.stop.signal, connected).catch((err) => (failure = err));
    await waitFor(() => failure ?? delivered.some((m) => m.text === 'hi'), 10_000);
    expect(failure).toBeUndefined();
    const again = refused()
      .slice(spam.length)
      .map((l) => l.room);
    // The oldest `over` were forgotten to make room (and handled once more); the rest were not.
    expect(again).toEqual(spam.slice(0, over));
    expect(f.mx.callsOf('join')).toHaveLength(0);
  });
});
