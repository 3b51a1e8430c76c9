import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MatrixAdapter } from '../../../channels/matrix/adapter.js';
import { takeoverFloor } from '../../../channels/matrix/resume-floor.js';
import { SyncStateFile } from '../../../channels/matrix/sync-state.js';
import type { ChannelMessage } from '../../../src/contracts/message.js';
import type { FakeMatrix } from '../../fakes/matrix/server.js';
import { waitFor } from '../../helpers/daemon.js';
import { withTempDir } from '../../helpers/fixtures.js';
import { withMatrix } from '../../helpers/matrix.js';

interface Line {
  level: number;
  msg: string;
  skipped?: number;
  reachMs?: number;
  bound?: string;
}

const TAKEOVER_LINE =
  "Matrix started /sync with no position of its own where the listener moves between instances: its first batch answered the messages of the inbox's duplicate window and skipped the older ones (history)";
/** The cluster's shared inbox: 90 s, so a catch-up reaches 75 s back (15 s for the clocks). */
const CLUSTER_WINDOW_MS = 90_000;
const MINUTE_MS = 60_000;

describe('Matrix: a listener with no /sync position of its own, where listeners move between instances (cluster mode)', () => {
  let mx: FakeMatrix;
  let dir: string;
  let stop: AbortController;
  let lines: Line[];
  const delivered: ChannelMessage[] = [];
  const texts = () => delivered.map((m) => m.text);
  const logged = (msg: string) => lines.filter((l) => l.msg === msg);
  /** The adapter listening on `stop` with the cluster's window; `listenerMoves` as the daemon sets it with [cluster]. */
  const listen = (listenerMoves: boolean, rooms = [mx.groupRoom]) => {
    const run = { failure: undefined as unknown, done: false };
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
        duplicateWindowMs: () => CLUSTER_WINDOW_MS,
        listenerMoves,
      },
      mx.token,
    )
      .listen(
        async (m) => {
          delivered.push(m);
          return true;
        },
        stop.signal,
        () => {},
      )
      .catch((err) => (run.failure = err))
      .finally(() => (run.done = true));
    return run;
  };
  const stored = () => new SyncStateFile(dir, 'mx').read(mx.userId);
  /** Every event so far is handed over and the position stored past it. */
  const storedToEnd = () => waitFor(() => stored()?.since === `s${mx.position}`, 10_000);
  /** A message to the bot in the direct chat, sent `agoMs` ago by the homeserver's clock. */
  const dmSent = (text: string, agoMs: number) => mx.post(mx.dmRoom, { msgtype: 'm.text', body: text }, mx.alice, 'm.room.message', Date.now() - agoMs);
  const groupSent = (text: string, agoMs: number) => mx.post(mx.groupRoom, { msgtype: 'm.text', body: text }, mx.alice, 'm.room.message', Date.now() - agoMs);
  /** The first /sync is stored; then a live message, answered by a later batch. */
  const thenLive = async (run: { failure: unknown }) => {
    await storedToEnd();
    expect(run.failure).toBeUndefined();
    mx.dm('live');
    await waitFor(() => run.failure ?? delivered.some((m) => m.text === 'live'), 10_000);
    await storedToEnd();
    expect(run.failure).toBeUndefined();
  };

  beforeEach(async () => {
    mx = await withMatrix();
    dir = withTempDir('matrix-takeover-fresh');
    stop = new AbortController();
    lines = [];
    delivered.length = 0;
  });
  afterEach(() => stop.abort());

  it('answers what its first sync holds from within the duplicate window (the killed holder may never have stored it), not what is older, and a live message after; each once', async () => {
    // Answered by the instance that held the lease 10 minutes ago: past the shared inbox's memory.
    dmSent('asked 10 minutes ago', 10 * MINUTE_MS);
    // Sent while the lease moved from a holder killed before it stored it.
    dmSent('asked 5 s ago', 5000);
    const run = listen(true);
    await thenLive(run);
    expect(texts()).toEqual(['asked 5 s ago', 'live']);
    expect(new Set(delivered.map((m) => m.messageId)).size).toBe(2);
    expect(logged(TAKEOVER_LINE)).toMatchObject([{ level: 30, skipped: 1, reachMs: CLUSTER_WINDOW_MS - 15_000 }]);
    expect(mx.callsOf('messages')).toEqual([]);
  });

  it('on one node (no listenerMoves) the same first start answers nothing from before it, only the live message', async () => {
    dmSent('asked 10 minutes ago', 10 * MINUTE_MS);
    dmSent('asked 5 s ago', 5000);
    const run = listen(false);
    await thenLive(run);
    expect(texts()).toEqual(['live']);
    expect(logged(TAKEOVER_LINE)).toEqual([]);
  });

  it('a limited first timeline whose oldest message is within the window: the gap is read back with no `to`, ending by age, and answered first', async () => {
    groupSent('asked 10 minutes ago', 10 * MINUTE_MS);
    for (let i = 1; i <= 55; i++) groupSent(`new${i}`, 5000);
    const run = listen(true);
    await thenLive(run);
    // 50 in the /sync answer, 5 read back; the older one met at the room's start is skipped.
    expect(texts()).toEqual([...Array.from({ length: 55 }, (_, i) => `new${i + 1}`), 'live']);
    const walk = mx.callsOf('messages');
    expect(walk.length).toBeGreaterThan(0);
    for (const call of walk) expect(call.query).not.toHaveProperty('to');
    expect(logged(TAKEOVER_LINE)).toMatchObject([{ skipped: 1 }]);
  });

  it('a limited first timeline whose oldest message is older than the window is not walked back: what it left out is older still', async () => {
    for (let i = 1; i <= 55; i++) groupSent(`old${i}`, 10 * MINUTE_MS);
    for (let i = 1; i <= 3; i++) groupSent(`new${i}`, 5000);
    const run = listen(true);
    await thenLive(run);
    expect(texts()).toEqual(['new1', 'new2', 'new3', 'live']);
    expect(mx.callsOf('messages')).toEqual([]);
    // The 47 old ones of the 50-event timeline.
    expect(logged(TAKEOVER_LINE)).toMatchObject([{ skipped: 47 }]);
  });
});

describe('the takeover floor', () => {
  it('reaches back the duplicate window, never past when the listener began (a first sync delayed by 429s)', () => {
    const nowMs = 1_800_000_000_000;
    expect(takeoverFloor(() => 90_000, nowMs - 1000, nowMs)).toMatchObject({ beforeMs: nowMs - 75_000, reachMs: 75_000, skipped: 0 });
    expect(takeoverFloor(() => 90_000, nowMs - 200_000, nowMs)).toMatchObject({ beforeMs: nowMs - 200_000 });
  });
});
