import { getEventListeners } from 'node:events';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { raceAbort, settleWithin, sleep, untilAborted } from '../../../src/util/abortable.js';

/** How many 'abort' listeners `signal` holds now. */
const listeners = (signal: AbortSignal) => getEventListeners(signal, 'abort').length;

const never = <T>() => new Promise<T>(() => {});

describe('abortable waits', () => {
  beforeEach(() => vi.useFakeTimers({ now: 0 }));
  afterEach(() => vi.useRealTimers());

  it('untilAborted resolves on the abort, at once when already aborted', async () => {
    const c = new AbortController();
    let done = false;
    void untilAborted(c.signal).then(() => (done = true));
    await vi.advanceTimersByTimeAsync(60_000);
    expect(done).toBe(false);
    c.abort();
    await vi.advanceTimersByTimeAsync(0);
    expect(done).toBe(true);
    await untilAborted(c.signal);
  });

  it('raceAbort: the work wins and the listener goes; an abort rejects with its reason and absorbs the late failure', async () => {
    const c = new AbortController();
    await expect(raceAbort(Promise.resolve(3), c.signal)).resolves.toBe(3);
    await expect(raceAbort(Promise.reject(new Error('no')), c.signal)).rejects.toThrow('no');
    expect(listeners(c.signal)).toBe(0);
    let fail!: (e: Error) => void;
    const work = new Promise<number>((_, reject) => (fail = reject));
    const raced = raceAbort(work, c.signal);
    const reason = new Error('stopped');
    c.abort(reason);
    await expect(raced).rejects.toBe(reason);
    // The work's own failure later is not an unhandled rejection.
    fail(new Error('late'));
    await expect(raceAbort(never(), c.signal)).rejects.toBe(reason);
  });

  it('settleWithin says whether the work settled: before the time, the abort, or neither; it leaves no timer or listener', async () => {
    const c = new AbortController();
    await expect(settleWithin(Promise.reject(new Error('no')), 1000, c.signal)).resolves.toBe(true);
    expect(listeners(c.signal)).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
    const timedOut = settleWithin(never(), 1000, c.signal);
    await vi.advanceTimersByTimeAsync(1000);
    await expect(timedOut).resolves.toBe(false);
    expect(listeners(c.signal)).toBe(0);
    // No time bound: only the abort ends the wait.
    const unbounded = settleWithin(never(), Infinity, c.signal);
    expect(vi.getTimerCount()).toBe(0);
    c.abort();
    await expect(unbounded).resolves.toBe(false);
    await expect(settleWithin(Promise.resolve(), 1000, c.signal)).resolves.toBe(false);
  });

  it('sleep ends early on abort and leaves no listener behind', async () => {
    const c = new AbortController();
    const slept = sleep(1000, c.signal);
    expect(listeners(c.signal)).toBe(1);
    await vi.advanceTimersByTimeAsync(1000);
    await slept;
    expect(listeners(c.signal)).toBe(0);
  });

  it('sleep ends early when its owner calls the wake it was handed, and leaves no timer or listener', async () => {
    const c = new AbortController();
    let wake: (() => void) | undefined;
    let done = false;
    const slept = sleep(1000, c.signal, (w) => (wake = w)).then(() => (done = true));
    await vi.advanceTimersByTimeAsync(10);
    expect(done).toBe(false);
    wake!();
    await slept;
    expect(Date.now()).toBe(10);
    expect(listeners(c.signal)).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
    // A wait that does not start (no time left) hands over no wake.
    let handed = false;
    await sleep(0, c.signal, () => (handed = true));
    expect(handed).toBe(false);
  });
});
