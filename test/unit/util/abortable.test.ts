import { getEventListeners } from 'node:events';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { raceAbort, sleep, untilAborted } from '../../../src/util/abortable.js';

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

  it('sleep ends early on abort and leaves no listener behind', async () => {
    const c = new AbortController();
    const slept = sleep(1000, c.signal);
    expect(listeners(c.signal)).toBe(1);
    await vi.advanceTimersByTimeAsync(1000);
    await slept;
    expect(listeners(c.signal)).toBe(0);
  });
});
