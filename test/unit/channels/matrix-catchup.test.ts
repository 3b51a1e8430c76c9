import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MatrixAdapter } from '../../../channels/matrix/adapter.js';
import { SyncStateFile } from '../../../channels/matrix/sync-state.js';
import type { ChannelMessage } from '../../../src/contracts/message.js';
import type { FakeMatrix } from '../../fakes/matrix/server.js';
import { waitFor } from '../../helpers/daemon.js';
import { withTempDir } from '../../helpers/fixtures.js';
import { withMatrix } from '../../helpers/matrix.js';

interface Line {
  level: number;
  msg: string;
  room?: string;
  bound?: string;
  read?: number;
  notReadAtLeast?: number;
  events?: number;
}

const GAP_WARNING = 'Matrix did not read every message a limited /sync left out in a room; the older ones are not answered';
const READ_BACK = 'Matrix read back the messages a limited /sync left out';
const DAY_MS = 24 * 60 * 60 * 1000;

describe('Matrix: messages a limited /sync timeline leaves out are read back over /messages', () => {
  let mx: FakeMatrix;
  let dir: string;
  let stop: AbortController;
  let lines: Line[];
  const delivered: ChannelMessage[] = [];
  const deliver = async (m: ChannelMessage) => {
    delivered.push(m);
    return true;
  };
  const logged = (msg: string) => lines.filter((l) => l.msg === msg);
  const texts = () => delivered.map((m) => m.text);
  const adapter = (rooms = [mx.groupRoom]) =>
    new MatrixAdapter(
      {
        id: 'mx',
        homeserverUrl: mx.url,
        userId: mx.userId,
        rooms,
        autoJoin: false,
        allowFrom: ['*'],
        stateDir: dir,
        log: pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s)) }),
        syncTimeoutMs: 5000,
      },
      mx.token,
    );
  /** The adapter listens (on `stop`); a failure is kept for the test to see. */
  const listen = (a = adapter()) => {
    const run = { failure: undefined as unknown, done: false };
    a.listen(deliver, stop.signal, () => {})
      .catch((err) => (run.failure = err))
      .finally(() => (run.done = true));
    return run;
  };
  /** The bot was away since the fake began: its stored position is before everything the fake holds. */
  const awayFromStart = () => new SyncStateFile(dir, 'mx').write({ userId: mx.userId, since: 's0', encryptedNotified: [] });
  /** `n` numbered messages in a room, `m1`…`mn`. */
  const burst = (room: string, n: number, prefix = 'm', sentAtMs?: number) => {
    for (let i = 1; i <= n; i++) mx.post(room, { msgtype: 'm.text', body: `${prefix}${i}` }, mx.alice, 'm.room.message', sentAtMs);
  };
  const numbered = (prefix: string, from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => `${prefix}${from + i}`);

  beforeEach(async () => {
    mx = await withMatrix();
    dir = withTempDir('matrix-catchup');
    stop = new AbortController();
    lines = [];
    delivered.length = 0;
  });
  afterEach(() => stop.abort());

  it('a question sent while the daemon was away, followed by 60 more messages in the room, is delivered: all 61, in order', async () => {
    // The daemon ran once (its first sync is history) and stopped.
    const first = listen();
    await waitFor(() => mx.callsOf('sync').length >= 2);
    stop.abort();
    await waitFor(() => first.done);
    expect(first.failure).toBeUndefined();
    const storedSince = new SyncStateFile(dir, 'mx').read(mx.userId)!.since;

    // Meanwhile: a question to the bot, then 60 more messages in the same room.
    mx.group('what is the deploy status?', { mention: true });
    burst(mx.groupRoom, 60);

    stop = new AbortController();
    const run = listen();
    await waitFor(() => run.failure ?? delivered.length >= 61, 10_000);
    expect(run.failure).toBeUndefined();
    expect(texts()).toEqual([`${mx.displayName}: what is the deploy status?`, ...numbered('m', 1, 60)]);
    expect(delivered[0]).toMatchObject({ chat: { id: mx.groupRoom, type: 'group' }, addressed: true });
    // The spec's back-pagination: from the timeline's prev_batch, back to the previous sync's since.
    const limited = mx.callsOf('sync').find((c) => c.query.since === storedSince)!;
    expect(limited).toBeDefined();
    const [page, last] = mx.callsOf('messages');
    expect(page!.path).toBe(`/_matrix/client/v3/rooms/${encodeURIComponent(mx.groupRoom)}/messages`);
    expect(page!.query).toMatchObject({ dir: 'b', from: expect.stringMatching(/^s\d+$/), to: storedSince, limit: '100' });
    expect(JSON.parse(page!.query.filter!)).toEqual({ types: ['m.room.message'] });
    // No `end` in the answer after the gap: nothing more to read.
    expect(last!.query.from).not.toBe(page!.query.from);
    expect(mx.callsOf('messages')).toHaveLength(2);
    expect(logged(READ_BACK)).toMatchObject([{ room: mx.groupRoom, events: 11 }]);
    expect(logged(GAP_WARNING)).toEqual([]);
    // The position moved past the batch only once it was all handed over.
    await waitFor(() => new SyncStateFile(dir, 'mx').read(mx.userId)!.since === `s${mx.position}`);
  });

  it('a transient /messages failure keeps the position: the batch, gap and all, is read again', async () => {
    awayFromStart();
    burst(mx.groupRoom, 61);
    mx.fail('messages', { status: 502 });
    const run = listen();
    await waitFor(() => run.done);
    expect(run.failure).toMatchObject({ code: 'CHANNEL_UNAVAILABLE' });
    expect(delivered).toEqual([]);
    expect(new SyncStateFile(dir, 'mx').read(mx.userId)!.since).toBe('s0');

    // The supervisor runs the listener again.
    const again = listen();
    await waitFor(() => again.failure ?? delivered.length >= 61, 10_000);
    expect(again.failure).toBeUndefined();
    expect(texts()).toEqual(numbered('m', 1, 61));
  });

  it('reads back at most 1,000 missed events of a room, the newest, and warns how many at least it left', async () => {
    awayFromStart();
    burst(mx.groupRoom, 1100);
    const run = listen();
    await waitFor(() => run.failure ?? delivered.length >= 1050, 10_000);
    expect(run.failure).toBeUndefined();
    // 50 in the /sync answer, 1,000 read back; the oldest 50 not.
    expect(texts()).toEqual(numbered('m', 51, 1100));
    expect(logged(GAP_WARNING)).toMatchObject([{ level: 40, room: mx.groupRoom, bound: 'events', read: 1000, notReadAtLeast: 50 }]);
    expect(mx.callsOf('messages').map((c) => c.query.limit)).toEqual(Array(11).fill('100'));
  });

  it('reads back at most 2,000 missed events in one batch: a room past that is named in a warning, not read', async () => {
    const rooms = ['!busy1:fake.test', '!busy2:fake.test', '!busy3:fake.test'];
    for (const room of rooms) mx.joinRoom(room);
    awayFromStart();
    for (const [i, room] of rooms.entries()) burst(room, 1050, `r${i + 1}-`);
    const run = listen(adapter(rooms));
    await waitFor(() => run.failure ?? delivered.length >= 2150, 10_000);
    expect(run.failure).toBeUndefined();
    expect(delivered.filter((m) => m.chat.id === rooms[0])).toHaveLength(1050);
    expect(delivered.filter((m) => m.chat.id === rooms[1])).toHaveLength(1050);
    expect(delivered.filter((m) => m.chat.id === rooms[2]).map((m) => m.text)).toEqual(numbered('r3-', 1001, 1050));
    expect(logged(GAP_WARNING)).toMatchObject([{ level: 40, room: rooms[2], bound: 'events', read: 0 }]);
    expect(mx.callsOf('messages').some((c) => c.path.includes(encodeURIComponent(rooms[2]!)))).toBe(false);
  });

  it('does not read back messages older than a day: history, not questions', async () => {
    awayFromStart();
    burst(mx.groupRoom, 5, 'old', Date.now() - DAY_MS - 60_000);
    burst(mx.groupRoom, 60);
    const run = listen();
    await waitFor(() => run.failure ?? delivered.length >= 60, 10_000);
    expect(run.failure).toBeUndefined();
    expect(texts()).toEqual(numbered('m', 1, 60));
    expect(logged(GAP_WARNING)).toMatchObject([{ level: 40, room: mx.groupRoom, bound: 'age', read: 10, notReadAtLeast: 5 }]);
  });

  it('a /messages answer over 8 MiB is asked for again with half the events', async () => {
    awayFromStart();
    burst(mx.groupRoom, 61);
    mx.fail('messages', { oversized: true });
    const run = listen();
    await waitFor(() => run.failure ?? delivered.length >= 61, 20_000);
    expect(run.failure).toBeUndefined();
    expect(texts()).toEqual(numbered('m', 1, 61));
    expect(mx.callsOf('messages').map((c) => c.query.limit)).toEqual(['100', '50', '50']);
    expect(logged('Matrix /messages answer too large; asking again with fewer events')).toMatchObject([{ level: 40, room: mx.groupRoom }]);
  });

  it('a refused /messages (403) leaves that gap with a warning; the channel goes on', async () => {
    awayFromStart();
    burst(mx.groupRoom, 61);
    mx.fail('messages', { status: 403 });
    const run = listen();
    await waitFor(() => run.failure ?? delivered.length >= 50, 10_000);
    mx.dm('still there?');
    await waitFor(() => run.failure ?? delivered.some((m) => m.text === 'still there?'), 10_000);
    expect(run.failure).toBeUndefined();
    expect(texts()).toEqual([...numbered('m', 12, 61), 'still there?']);
    expect(logged(GAP_WARNING)).toMatchObject([{ level: 40, room: mx.groupRoom, bound: 'refused', read: 0 }]);
  });

  it('a fresh start (no stored position) reads no gap: its history is not answered', async () => {
    burst(mx.groupRoom, 61);
    const run = listen();
    await waitFor(() => mx.callsOf('sync').length >= 2);
    mx.dm('hello');
    await waitFor(() => run.failure ?? delivered.length >= 1, 10_000);
    expect(run.failure).toBeUndefined();
    expect(texts()).toEqual(['hello']);
    expect(mx.callsOf('messages')).toEqual([]);
  });
});
