import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MatrixAdapter } from '../../../channels/matrix/adapter.js';
import { resumeFloor } from '../../../channels/matrix/resume-floor.js';
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
  positionAgeMs?: number;
  bound?: string;
}

const RESUME_WARNING =
  "Matrix resumed /sync from a position stored longer ago than the inbox's duplicate window (or a day): the messages of its first batch older than that were skipped, as they may have been answered already";
const GAP_WARNING = 'Matrix did not read every message a limited /sync left out in a room; the older ones are not answered';
/** The cluster's shared inbox: 90 s, so a catch-up reaches 75 s back (15 s for the clocks). */
const CLUSTER_WINDOW_MS = 90_000;
const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;

describe('Matrix: a listener resuming from an old /sync position (a lease taken over) skips what the inbox no longer recognises', () => {
  let mx: FakeMatrix;
  let dir: string;
  let stop: AbortController;
  let lines: Line[];
  const delivered: ChannelMessage[] = [];
  const texts = () => delivered.map((m) => m.text);
  const logged = (msg: string) => lines.filter((l) => l.msg === msg);
  /** The adapter listening on `stop`; `duplicateWindowMs` as the daemon hands it in cluster mode. */
  const listen = (duplicateWindowMs: (() => number) | undefined, rooms = [mx.groupRoom]) => {
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
        ...(duplicateWindowMs ? { duplicateWindowMs } : {}),
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
  const stored = () => new SyncStateFile(dir, 'mx').read(mx.userId)!;
  /** This instance ran the listener before, up to `s0`: stored at `savedAtMs` (absent: a file from before it was kept). */
  const ranBefore = (savedAtMs: number | undefined) =>
    new SyncStateFile(dir, 'mx').write({ userId: mx.userId, since: 's0', encryptedNotified: [], ...(savedAtMs !== undefined ? { savedAtMs } : {}) });
  /** A message to the bot in the direct chat, sent `agoMs` ago by the homeserver's clock. */
  const dmSent = (text: string, agoMs: number) => mx.post(mx.dmRoom, { msgtype: 'm.text', body: text }, mx.alice, 'm.room.message', Date.now() - agoMs);
  /** Every event so far is handed over and the position stored past it. */
  const storedToEnd = () => waitFor(() => stored().since === `s${mx.position}`, 10_000);

  beforeEach(async () => {
    mx = await withMatrix();
    dir = withTempDir('matrix-takeover');
    stop = new AbortController();
    lines = [];
    delivered.length = 0;
  });
  afterEach(() => stop.abort());

  it.each([
    ['two hours ago', () => Date.now() - 2 * HOUR_MS],
    ['at an unknown time (a file from before the time was kept)', () => undefined],
  ])('a position stored %s: its first batch skips a message older than the window, answers a newer one, and later batches a late one', async (_, savedAt) => {
    ranBefore(savedAt());
    // Answered by the instance that held the lease meanwhile, 10 minutes ago: past the shared inbox's memory.
    dmSent('asked 10 minutes ago', 10 * MINUTE_MS);
    dmSent('asked 5 s ago', 5000);
    const startedAtMs = Date.now();
    const run = listen(() => CLUSTER_WINDOW_MS);
    await storedToEnd();
    expect(run.failure).toBeUndefined();
    expect(texts()).toEqual(['asked 5 s ago']);
    expect(logged(RESUME_WARNING)).toMatchObject([{ level: 40, skipped: 1, reachMs: CLUSTER_WINDOW_MS - 15_000 }]);
    // The position moved, stamped with when: a later start resumes from it as a recent one.
    expect(stored().savedAtMs).toBeGreaterThanOrEqual(startedAtMs);

    // A later batch is read whole: an event with an old timestamp there came late (federation) and is answered.
    dmSent('from a server that was away', 10 * MINUTE_MS);
    await waitFor(() => run.failure ?? delivered.length >= 2, 10_000);
    await storedToEnd();
    expect(run.failure).toBeUndefined();
    expect(texts()).toEqual(['asked 5 s ago', 'from a server that was away']);
    expect(logged(RESUME_WARNING)).toHaveLength(1);
  });

  it('a position stored just now is read whole, and the stored one carries the time it was stored', async () => {
    ranBefore(Date.now());
    dmSent('asked 10 minutes ago', 10 * MINUTE_MS);
    dmSent('asked 5 s ago', 5000);
    const startedAtMs = Date.now();
    const run = listen(() => CLUSTER_WINDOW_MS);
    await storedToEnd();
    expect(run.failure).toBeUndefined();
    expect(texts()).toEqual(['asked 10 minutes ago', 'asked 5 s ago']);
    expect(logged(RESUME_WARNING)).toEqual([]);
    expect(stored().savedAtMs).toBeGreaterThanOrEqual(startedAtMs);
  });

  it("on one node (a window of days) a position two hours old is read whole: the day's bound is the reach", async () => {
    ranBefore(Date.now() - 2 * HOUR_MS);
    dmSent('asked 10 minutes ago', 10 * MINUTE_MS);
    const run = listen(undefined);
    await storedToEnd();
    expect(run.failure).toBeUndefined();
    expect(texts()).toEqual(['asked 10 minutes ago']);
    expect(logged(RESUME_WARNING)).toEqual([]);
  });

  it("the first batch's gap is read back no further than the window either", async () => {
    ranBefore(Date.now() - 2 * HOUR_MS);
    for (let i = 1; i <= 20; i++) mx.post(mx.groupRoom, { msgtype: 'm.text', body: `old${i}` }, mx.alice, 'm.room.message', Date.now() - 10 * MINUTE_MS);
    for (let i = 1; i <= 55; i++) mx.post(mx.groupRoom, { msgtype: 'm.text', body: `new${i}` }, mx.alice, 'm.room.message', Date.now() - 5000);
    const run = listen(() => CLUSTER_WINDOW_MS);
    await storedToEnd();
    expect(run.failure).toBeUndefined();
    // 50 in the /sync answer, 5 read back; the 20 older ones skipped (the walk reached the gap's end before a run of 100).
    expect(texts()).toEqual(Array.from({ length: 55 }, (_, i) => `new${i + 1}`));
    expect(logged(GAP_WARNING)).toMatchObject([{ level: 40, bound: 'age' }]);
    expect(logged(RESUME_WARNING)).toMatchObject([{ level: 40, skipped: 20 }]);
  });
});

describe('the resume floor', () => {
  it('never passes when the listener began: a first batch delayed past the window (429s) still answers what came after the start', () => {
    const nowMs = 1_800_000_000_000;
    const startedMs = nowMs - 200_000;
    expect(resumeFloor(nowMs - 7_200_000, () => 90_000, startedMs, nowMs)).toMatchObject({ beforeMs: startedMs, reachMs: 75_000 });
    expect(resumeFloor(nowMs - 7_200_000, () => 90_000, nowMs - 1000, nowMs)).toMatchObject({ beforeMs: nowMs - 75_000 });
    expect(resumeFloor(nowMs - 10_000, () => 90_000, startedMs, nowMs)).toBeUndefined();
  });
});
