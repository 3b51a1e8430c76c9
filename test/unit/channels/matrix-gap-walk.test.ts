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
  skipped?: number;
}

const GAP_WARNING = 'Matrix did not read every message a limited /sync left out in a room; the older ones are not answered';
const RESUME_WARNING =
  "Matrix resumed /sync from a position stored longer ago than the inbox's duplicate window (or a day): the messages of its first batch older than that were skipped, as they may have been answered already";
const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;
const DAY_MS = 24 * HOUR_MS;
/** The cluster's shared inbox: 90 s, so a resume from an old position reads 75 s back. */
const CLUSTER_WINDOW_MS = 90_000;

/**
 * A limited /sync's gap is read back newest first in the homeserver's order, which is the
 * order events reached it: a federated event that came late carries its old origin_server_ts,
 * in front of (further back: behind) messages sent after it.
 */
describe('Matrix: the walk back through a gap goes past a too-old event to the newer ones behind it', () => {
  let mx: FakeMatrix;
  let dir: string;
  let stop: AbortController;
  let lines: Line[];
  const delivered: ChannelMessage[] = [];
  const texts = () => delivered.map((m) => m.text);
  const logged = (msg: string) => lines.filter((l) => l.msg === msg);
  const listen = (duplicateWindowMs?: () => number) => {
    const run = { failure: undefined as unknown };
    new MatrixAdapter(
      {
        id: 'mx',
        homeserverUrl: mx.url,
        userId: mx.userId,
        rooms: [mx.groupRoom],
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
      .catch((err) => (run.failure = err));
    return run;
  };
  /** The bot's position is before everything the fake holds, stored at `savedAtMs` (now: trusted whole). */
  const awayFromStart = (savedAtMs = Date.now()) => new SyncStateFile(dir, 'mx').write({ userId: mx.userId, since: 's0', encryptedNotified: [], savedAtMs });
  /** A message in the group room sent `agoMs` ago by its sender's clock (a late federated one when posted after newer ones). */
  const sent = (body: string, agoMs: number) => mx.post(mx.groupRoom, { msgtype: 'm.text', body }, mx.alice, 'm.room.message', Date.now() - agoMs);
  const many = (prefix: string, n: number, agoMs: number) => {
    for (let i = 1; i <= n; i++) sent(`${prefix}${i}`, agoMs);
  };
  const numbered = (prefix: string, from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => `${prefix}${from + i}`);
  /** Every event so far is handed over and the position stored past it. */
  const storedToEnd = () => waitFor(() => new SyncStateFile(dir, 'mx').read(mx.userId)!.since === `s${mx.position}`, 10_000);

  beforeEach(async () => {
    mx = await withMatrix();
    dir = withTempDir('matrix-gap-walk');
    stop = new AbortController();
    lines = [];
    delivered.length = 0;
  });
  afterEach(() => stop.abort());

  // Before, the walk ended at the late event: the question behind it was lost.
  it('a late event older than a day is skipped, and the question sent a minute ago behind it is delivered', async () => {
    awayFromStart();
    sent('sent a minute ago', MINUTE_MS);
    sent('from a server away for two days', 2 * DAY_MS);
    many('m', 50, 0);
    const run = listen();
    await storedToEnd();
    expect(run.failure).toBeUndefined();
    // 50 in the /sync answer; the gap read back is the other two, the old one left.
    expect(texts()).toEqual(['sent a minute ago', ...numbered('m', 1, 50)]);
    expect(logged(GAP_WARNING)).toMatchObject([{ level: 40, room: mx.groupRoom, bound: 'age', read: 1, notReadAtLeast: 1 }]);
  });

  it('after a stale resume, an event older than the duplicate window is skipped and the newer one behind it delivered', async () => {
    awayFromStart(Date.now() - 2 * HOUR_MS);
    sent('asked 5 s ago', 5000);
    sent('answered 10 minutes ago by the lease holder then', 10 * MINUTE_MS);
    many('m', 50, 0);
    const run = listen(() => CLUSTER_WINDOW_MS);
    await storedToEnd();
    expect(run.failure).toBeUndefined();
    expect(texts()).toEqual(['asked 5 s ago', ...numbered('m', 1, 50)]);
    expect(logged(GAP_WARNING)).toMatchObject([{ level: 40, bound: 'age', read: 1, notReadAtLeast: 1 }]);
    expect(logged(RESUME_WARNING)).toMatchObject([{ level: 40, skipped: 1 }]);
  });

  it('99 too-old events in a row, across two pages, do not end the walk', async () => {
    awayFromStart();
    sent('behind 99 old ones', MINUTE_MS);
    many('old', 99, 2 * DAY_MS);
    many('m', 60, 0);
    const run = listen();
    await storedToEnd();
    expect(run.failure).toBeUndefined();
    // Page 1: m10…m1 and 90 old ones; page 2: 9 old ones and the message behind them; page 3 is empty, without `end`.
    expect(texts()).toEqual(['behind 99 old ones', ...numbered('m', 1, 60)]);
    expect(mx.callsOf('messages')).toHaveLength(3);
    expect(logged(GAP_WARNING)).toMatchObject([{ level: 40, bound: 'age', read: 11, notReadAtLeast: 99 }]);
  });

  it('the walk ends once 100 events in a row were too old: what is further back is not read', async () => {
    awayFromStart();
    sent('behind 190 old ones', MINUTE_MS);
    many('old', 190, 2 * DAY_MS);
    many('m', 60, 0);
    const run = listen();
    await storedToEnd();
    expect(run.failure).toBeUndefined();
    expect(texts()).toEqual(numbered('m', 1, 60));
    // Page 1: m10…m1 and 90 old ones (a run of 90); page 2: 100 old ones; no third page is asked for.
    expect(mx.callsOf('messages').map((c) => c.query.limit)).toEqual(['100', '100']);
    expect(logged(GAP_WARNING)).toMatchObject([{ level: 40, room: mx.groupRoom, bound: 'age', read: 10, notReadAtLeast: 190 }]);
  });
});
