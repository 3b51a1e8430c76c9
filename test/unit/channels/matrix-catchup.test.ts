import { describe, expect, it } from 'vitest';
import { SyncStateFile } from '../../../channels/matrix/sync-state.js';
import { waitFor } from '../../helpers/daemon.js';
import { DAY_MS, GAP_WARNING, matrixFixture, numbered } from '../../helpers/matrix.js';

const READ_BACK = 'Matrix read back the messages a limited /sync left out';

describe('Matrix: messages a limited /sync timeline leaves out are read back over /messages', () => {
  const f = matrixFixture('matrix-catchup');
  const { delivered, logged, texts, listen, awayFromStart, burst } = f;

  it('a question sent while the daemon was away, followed by 60 more messages in the room, is delivered: all 61, in order', async () => {
    // The daemon ran once (its first sync is history) and stopped.
    const first = listen();
    await waitFor(() => f.mx.callsOf('sync').length >= 2);
    await first.stop();
    expect(first.failure).toBeUndefined();
    const storedSince = f.stored()!.since;

    // Meanwhile: a question to the bot, then 60 more messages in the same room.
    f.mx.group('what is the deploy status?', { mention: true });
    burst(f.mx.groupRoom, 60);

    const run = listen();
    await waitFor(() => run.failure ?? delivered.length >= 61, 10_000);
    expect(run.failure).toBeUndefined();
    expect(texts()).toEqual([`${f.mx.displayName}: what is the deploy status?`, ...numbered('m', 1, 60)]);
    expect(delivered[0]).toMatchObject({ chat: { id: f.mx.groupRoom, type: 'group' }, addressed: true });
    // The spec's back-pagination: from the timeline's prev_batch, back to the previous sync's since.
    const limited = f.mx.callsOf('sync').find((c) => c.query.since === storedSince)!;
    expect(limited).toBeDefined();
    const [page, last] = f.mx.callsOf('messages');
    expect(page!.path).toBe(`/_matrix/client/v3/rooms/${encodeURIComponent(f.mx.groupRoom)}/messages`);
    expect(page!.query).toMatchObject({ dir: 'b', from: expect.stringMatching(/^s\d+$/), to: storedSince, limit: '100' });
    expect(JSON.parse(page!.query.filter!)).toEqual({ types: ['m.room.message'] });
    // No `end` in the answer after the gap: nothing more to read.
    expect(last!.query.from).not.toBe(page!.query.from);
    expect(f.mx.callsOf('messages')).toHaveLength(2);
    expect(logged(READ_BACK)).toMatchObject([{ room: f.mx.groupRoom, events: 11 }]);
    expect(logged(GAP_WARNING)).toEqual([]);
    // The position moved past the batch only once it was all handed over.
    await f.storedToEnd();
  });

  it('a transient /messages failure keeps the position: the batch, gap and all, is read again', async () => {
    awayFromStart();
    burst(f.mx.groupRoom, 61);
    f.mx.fail('messages', { status: 502 });
    const run = listen();
    await waitFor(() => run.done);
    expect(run.failure).toMatchObject({ code: 'CHANNEL_UNAVAILABLE' });
    expect(delivered).toEqual([]);
    expect(new SyncStateFile(f.dir, 'mx').read(f.mx.userId)!.since).toBe('s0');

    // The supervisor runs the listener again.
    const again = listen();
    await waitFor(() => again.failure ?? delivered.length >= 61, 10_000);
    expect(again.failure).toBeUndefined();
    expect(texts()).toEqual(numbered('m', 1, 61));
  });

  it('reads back at most 1,000 missed events of a room, the newest, and warns how many at least it left', async () => {
    awayFromStart();
    burst(f.mx.groupRoom, 1100);
    const run = listen();
    await waitFor(() => run.failure ?? delivered.length >= 1050, 10_000);
    expect(run.failure).toBeUndefined();
    // 50 in the /sync answer, 1,000 read back; the oldest 50 not.
    expect(texts()).toEqual(numbered('m', 51, 1100));
    expect(logged(GAP_WARNING)).toMatchObject([{ level: 40, room: f.mx.groupRoom, bound: 'events', read: 1000, notReadAtLeast: 50 }]);
    expect(f.mx.callsOf('messages').map((c) => c.query.limit)).toEqual(Array(11).fill('100'));
  });

  it('reads back at most 2,000 missed events in one batch: a room past that is named in a warning, not read', async () => {
    const rooms = ['!busy1:fake.test', '!busy2:fake.test', '!busy3:fake.test'];
    for (const room of rooms) f.mx.joinRoom(room);
    awayFromStart();
    for (const [i, room] of rooms.entries()) burst(room, 1050, `r${i + 1}-`);
    const run = listen(f.adapter({ rooms }));
    await waitFor(() => run.failure ?? delivered.length >= 2150, 10_000);
    expect(run.failure).toBeUndefined();
    expect(delivered.filter((m) => m.chat.id === rooms[0])).toHaveLength(1050);
    expect(delivered.filter((m) => m.chat.id === rooms[1])).toHaveLength(1050);
    expect(delivered.filter((m) => m.chat.id === rooms[2]).map((m) => m.text)).toEqual(numbered('r3-', 1001, 1050));
    expect(logged(GAP_WARNING)).toMatchObject([{ level: 40, room: rooms[2], bound: 'events', read: 0 }]);
    expect(f.mx.callsOf('messages').some((c) => c.path.includes(encodeURIComponent(rooms[2]!)))).toBe(false);
  });

  it('does not read back messages older than a day: history, not questions', async () => {
    awayFromStart();
    burst(f.mx.groupRoom, 5, 'old', DAY_MS + 60_000);
    burst(f.mx.groupRoom, 60);
    const run = listen();
    await waitFor(() => run.failure ?? delivered.length >= 60, 10_000);
    expect(run.failure).toBeUndefined();
    expect(texts()).toEqual(numbered('m', 1, 60));
    expect(logged(GAP_WARNING)).toMatchObject([{ level: 40, room: f.mx.groupRoom, bound: 'age', read: 10, notReadAtLeast: 5 }]);
  });

  it('a /messages answer over 8 MiB is asked for again with half the events', async () => {
    awayFromStart();
    burst(f.mx.groupRoom, 61);
    f.mx.fail('messages', { oversized: true });
    const run = listen();
    await waitFor(() => run.failure ?? delivered.length >= 61, 20_000);
    expect(run.failure).toBeUndefined();
    expect(texts()).toEqual(numbered('m', 1, 61));
    expect(f.mx.callsOf('messages').map((c) => c.query.limit)).toEqual(['100', '50', '50']);
    expect(logged('Matrix /messages answer too large; asking again with fewer events')).toMatchObject([{ level: 40, room: f.mx.groupRoom }]);
  });

  it('a refused /messages (403) leaves that gap with a warning; the channel goes on', async () => {
    awayFromStart();
    burst(f.mx.groupRoom, 61);
    f.mx.fail('messages', { status: 403 });
    const run = listen();
    await waitFor(() => run.failure ?? delivered.length >= 50, 10_000);
    f.mx.dm('still there?');
    await waitFor(() => run.failure ?? delivered.some((m) => m.text === 'still there?'), 10_000);
    expect(run.failure).toBeUndefined();
    expect(texts()).toEqual([...numbered('m', 12, 61), 'still there?']);
    expect(logged(GAP_WARNING)).toMatchObject([{ level: 40, room: f.mx.groupRoom, bound: 'refused', read: 0 }]);
  });

  it('a fresh start (no stored position) reads no gap: its history is not answered', async () => {
    burst(f.mx.groupRoom, 61);
    const run = listen();
    await waitFor(() => f.mx.callsOf('sync').length >= 2);
    f.mx.dm('hello');
    await waitFor(() => run.failure ?? delivered.length >= 1, 10_000);
    expect(run.failure).toBeUndefined();
    expect(texts()).toEqual(['hello']);
    expect(f.mx.callsOf('messages')).toEqual([]);
  });
});
