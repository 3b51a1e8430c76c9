import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { IdleTimer } from '../../../src/agent/idle-timer.js';

describe("IdleTimer (the model's silence bound)", () => {
  let fired: ReturnType<typeof vi.fn<() => void>>;
  let idle: IdleTimer;
  beforeEach(() => {
    vi.useFakeTimers();
    fired = vi.fn<() => void>();
    idle = new IdleTimer(1000, fired);
  });
  afterEach(() => vi.useRealTimers());

  it('fires after the model was silent its time; a piece of output starts the wait again', () => {
    idle.touch();
    vi.advanceTimersByTime(900);
    idle.touch();
    vi.advanceTimersByTime(999);
    expect(fired).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(fired).toHaveBeenCalledTimes(1);
  });

  it('waits while any tool call runs (output meanwhile arms nothing), and counts anew from the end of the last one', () => {
    idle.touch();
    const first = idle.pause();
    const second = idle.pause();
    idle.touch(); // the model goes on streaming while the calls run
    vi.advanceTimersByTime(5000);
    first();
    first(); // once only: the second call still runs
    vi.advanceTimersByTime(5000);
    expect(fired).not.toHaveBeenCalled();
    second();
    vi.advanceTimersByTime(999);
    expect(fired).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(fired).toHaveBeenCalledTimes(1);
  });

  it('after stop nothing fires, not even when a call ends later', () => {
    const end = idle.pause();
    idle.stop();
    end();
    idle.touch();
    expect(vi.getTimerCount()).toBe(0);
    expect(fired).not.toHaveBeenCalled();
  });
});
