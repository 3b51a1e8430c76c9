import { describe, expect, it } from 'vitest';
import { resumeFloor } from '../../../channels/matrix/resume-floor.js';
import { waitFor } from '../../helpers/daemon.js';
import { CLUSTER_WINDOW_MS, GAP_WARNING, HOUR_MS, MINUTE_MS, matrixFixture, RESUME_WARNING } from '../../helpers/matrix.js';

describe('Matrix: a listener resuming from an old /sync position (a lease taken over) skips what the inbox no longer recognises', () => {
  const f = matrixFixture('matrix-takeover');
  const { delivered, texts, logged, storedToEnd, dmSent, burst } = f;
  /** The adapter listening on `stop`; `duplicateWindowMs` as the daemon hands it in cluster mode. */
  const listen = (duplicateWindowMs: (() => number) | undefined) => f.listen(f.adapter({ duplicateWindowMs }));
  const stored = () => f.stored()!;
  /** This instance ran the listener before, up to `s0`: stored at `savedAtMs` (absent: a file from before it was kept). */
  const ranBefore = f.awayFromStart;
  /**
   * Listening with the cluster's window after two questions, one asked 10 minutes ago (answered by
   * the instance that held the lease meanwhile: past the shared inbox's memory) and one 5 s ago;
   * returned once the first batch is stored, with when it started.
   */
  const resumedAfterTwoQuestions = async () => {
    dmSent('asked 10 minutes ago', 10 * MINUTE_MS);
    dmSent('asked 5 s ago', 5000);
    const startedAtMs = Date.now();
    const run = listen(() => CLUSTER_WINDOW_MS);
    await storedToEnd();
    return { run, startedAtMs };
  };

  it.each([
    ['two hours ago', () => Date.now() - 2 * HOUR_MS],
    ['at an unknown time (a file from before the time was kept)', () => undefined],
  ])('a position stored %s: its first batch skips a message older than the window, answers a newer one, and later batches a late one', async (_, savedAt) => {
    ranBefore(savedAt());
    const { run, startedAtMs } = await resumedAfterTwoQuestions();
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
    const { run, startedAtMs } = await resumedAfterTwoQuestions();
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
    burst(f.mx.groupRoom, 20, 'old', 10 * MINUTE_MS);
    burst(f.mx.groupRoom, 55, 'new', 5000);
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
