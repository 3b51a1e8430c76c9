import { getEventListeners } from 'node:events';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { FirstVisibleFirst } from '../../../src/stream/first-visible.js';

const listeners = (signal: AbortSignal) => getEventListeners(signal, 'abort').length;

describe('FirstVisibleFirst', () => {
  beforeEach(() => vi.useFakeTimers({ now: 0 }));
  afterEach(() => vi.useRealTimers());

  it('heldMs waits while a reply has nothing shown and says how long; 0 when none waits', async () => {
    const gate = new FirstVisibleFirst();
    const signal = new AbortController().signal;
    expect(await gate.heldMs(signal)).toBe(0);
    const release = gate.enter();
    const held = gate.heldMs(signal);
    await vi.advanceTimersByTimeAsync(250);
    release();
    release(); // idempotent: the count never goes below what waits
    expect(await held).toBe(250);
    expect(gate.waiting).toBe(0);
    expect(listeners(signal)).toBe(0);
  });

  it("heldMs ends on its owner's wake (its turn ended) and on the abort, leaving no listener or wake behind", async () => {
    const gate = new FirstVisibleFirst();
    const stop = new AbortController();
    gate.enter();
    let wake: (() => void) | undefined;
    const held = gate.heldMs(stop.signal, (w) => (wake = w));
    await vi.advanceTimersByTimeAsync(40);
    expect(listeners(stop.signal)).toBe(1);
    wake!();
    expect(await held).toBe(40);
    expect(listeners(stop.signal)).toBe(0);
    expect(gate.waiting).toBe(1);

    const second = gate.heldMs(stop.signal);
    await vi.advanceTimersByTimeAsync(60);
    stop.abort();
    expect(await second).toBe(60);
    expect(listeners(stop.signal)).toBe(0);
  });
});
