import { describe, expect, it } from 'vitest';
import { CLUSTER_WINDOW_MS, DAY_MS, GAP_WARNING, HOUR_MS, MINUTE_MS, matrixFixture, numbered, RESUME_WARNING } from '../../helpers/matrix.js';

/**
 * A limited /sync's gap is read back newest first in the homeserver's order, which is the
 * order events reached it: a federated event that came late carries its old origin_server_ts,
 * in front of (further back: behind) messages sent after it.
 */
describe('Matrix: the walk back through a gap goes past a too-old event to the newer ones behind it', () => {
  const f = matrixFixture('matrix-gap-walk');
  const { texts, logged, storedToEnd, groupSent, burst } = f;
  const listen = (duplicateWindowMs?: () => number) => f.listen(f.adapter({ duplicateWindowMs }));
  /** The bot's position is before everything the fake holds, stored at `savedAtMs` (now: trusted whole). */
  const awayFromStart = (savedAtMs = Date.now()) => f.awayFromStart(savedAtMs);

  // Before, the walk ended at the late event: the question behind it was lost.
  it('a late event older than a day is skipped, and the question sent a minute ago behind it is delivered', async () => {
    awayFromStart();
    groupSent('sent a minute ago', MINUTE_MS);
    groupSent('from a server away for two days', 2 * DAY_MS);
    burst(f.mx.groupRoom, 50);
    const run = listen();
    await storedToEnd();
    expect(run.failure).toBeUndefined();
    // 50 in the /sync answer; the gap read back is the other two, the old one left.
    expect(texts()).toEqual(['sent a minute ago', ...numbered('m', 1, 50)]);
    expect(logged(GAP_WARNING)).toMatchObject([{ level: 40, room: f.mx.groupRoom, bound: 'age', read: 1, notReadAtLeast: 1 }]);
  });

  it('after a stale resume, an event older than the duplicate window is skipped and the newer one behind it delivered', async () => {
    awayFromStart(Date.now() - 2 * HOUR_MS);
    groupSent('asked 5 s ago', 5000);
    groupSent('answered 10 minutes ago by the lease holder then', 10 * MINUTE_MS);
    burst(f.mx.groupRoom, 50);
    const run = listen(() => CLUSTER_WINDOW_MS);
    await storedToEnd();
    expect(run.failure).toBeUndefined();
    expect(texts()).toEqual(['asked 5 s ago', ...numbered('m', 1, 50)]);
    expect(logged(GAP_WARNING)).toMatchObject([{ level: 40, bound: 'age', read: 1, notReadAtLeast: 1 }]);
    expect(logged(RESUME_WARNING)).toMatchObject([{ level: 40, skipped: 1 }]);
  });

  it('99 too-old events in a row, across two pages, do not end the walk', async () => {
    awayFromStart();
    groupSent('behind 99 old ones', MINUTE_MS);
    burst(f.mx.groupRoom, 99, 'old', 2 * DAY_MS);
    burst(f.mx.groupRoom, 60);
    const run = listen();
    await storedToEnd();
    expect(run.failure).toBeUndefined();
    // Page 1: m10…m1 and 90 old ones; page 2: 9 old ones and the message behind them; page 3 is empty, without `end`.
    expect(texts()).toEqual(['behind 99 old ones', ...numbered('m', 1, 60)]);
    expect(f.mx.callsOf('messages')).toHaveLength(3);
    expect(logged(GAP_WARNING)).toMatchObject([{ level: 40, bound: 'age', read: 11, notReadAtLeast: 99 }]);
  });

  it('the walk ends once 100 events in a row were too old: what is further back is not read', async () => {
    awayFromStart();
    groupSent('behind 190 old ones', MINUTE_MS);
    burst(f.mx.groupRoom, 190, 'old', 2 * DAY_MS);
    burst(f.mx.groupRoom, 60);
    const run = listen();
    await storedToEnd();
    expect(run.failure).toBeUndefined();
    expect(texts()).toEqual(numbered('m', 1, 60));
    // Page 1: m10…m1 and 90 old ones (a run of 90); page 2: 100 old ones; no third page is asked for.
    expect(f.mx.callsOf('messages').map((c) => c.query.limit)).toEqual(['100', '100']);
    expect(logged(GAP_WARNING)).toMatchObject([{ level: 40, room: f.mx.groupRoom, bound: 'age', read: 10, notReadAtLeast: 190 }]);
  });
});
