import { describe, expect, it } from 'vitest';
import { takeoverFloor } from '../../../channels/matrix/resume-floor.js';
import { waitFor } from '../../helpers/daemon.js';
import { CLUSTER_WINDOW_MS, GAP_WARNING, MINUTE_MS, matrixFixture } from '../../helpers/matrix.js';

const TAKEOVER_LINE =
  "Matrix started /sync with no position of its own where the listener moves between instances: its first batch answered the messages of the inbox's duplicate window and skipped the older ones (history)";

describe('Matrix: a listener with no /sync position of its own, where listeners move between instances (cluster mode)', () => {
  const f = matrixFixture('matrix-takeover-fresh');
  const { delivered, texts, logged, storedToEnd, dmSent, groupSent, burst } = f;
  /** The adapter listening on `stop` with the cluster's window; `listenerMoves` as the daemon sets it with [cluster]. */
  const listen = (listenerMoves: boolean) => f.listen(f.adapter({ duplicateWindowMs: () => CLUSTER_WINDOW_MS, listenerMoves }));
  /** The first /sync is stored; then a live message, answered by a later batch. */
  const thenLive = async (run: { failure: unknown }) => {
    await storedToEnd();
    expect(run.failure).toBeUndefined();
    f.mx.dm('live');
    await waitFor(() => run.failure ?? delivered.some((m) => m.text === 'live'), 10_000);
    await storedToEnd();
    expect(run.failure).toBeUndefined();
  };

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
    expect(f.mx.callsOf('messages')).toEqual([]);
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
    burst(f.mx.groupRoom, 55, 'new', 5000);
    const run = listen(true);
    await thenLive(run);
    // 50 in the /sync answer, 5 read back; the older one met at the room's start is skipped.
    expect(texts()).toEqual([...Array.from({ length: 55 }, (_, i) => `new${i + 1}`), 'live']);
    const walk = f.mx.callsOf('messages');
    expect(walk.length).toBeGreaterThan(0);
    for (const call of walk) expect(call.query).not.toHaveProperty('to');
    expect(logged(TAKEOVER_LINE)).toMatchObject([{ skipped: 1 }]);
    // Ending by age is how a walk with no `to` is meant to end: counted in the info line, no warning per room.
    expect(logged(GAP_WARNING)).toEqual([]);
  });

  it('says it connected before the catch-up of its first sync: a walk waiting out a 429 does not run inside the connect timeout', async () => {
    groupSent('asked 10 minutes ago', 10 * MINUTE_MS);
    burst(f.mx.groupRoom, 55, 'new', 5000);
    f.mx.fail('messages', { status: 429, retryAfterMs: 25_000 });
    const run = listen(true);
    await waitFor(() => run.failure ?? f.mx.callsOf('messages').length > 0, 10_000);
    await waitFor(() => run.failure ?? run.connected, 5_000);
    expect(run.failure).toBeUndefined();
    // Still waiting out the 429: nothing of the batch is delivered yet.
    expect(delivered).toEqual([]);
  });

  it('a limited first timeline whose oldest message is older than the window is not walked back: what it left out is older still', async () => {
    burst(f.mx.groupRoom, 55, 'old', 10 * MINUTE_MS);
    burst(f.mx.groupRoom, 3, 'new', 5000);
    const run = listen(true);
    await thenLive(run);
    expect(texts()).toEqual(['new1', 'new2', 'new3', 'live']);
    expect(f.mx.callsOf('messages')).toEqual([]);
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
