import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { CodedError } from '../../../src/contracts/errors.js';
import type { Tool, ToolContext } from '../../../src/contracts/tools.js';
import { CancelledByUser } from '../../../src/runtime/running-calls.js';
import { timedTool } from '../../../src/runtime/tool-registry.js';

const ctxWith = (signal: AbortSignal): ToolContext => ({ signal, scope: 'web:c1', timeZone: 'UTC' });
const tool = (run: Tool['run']): Tool => ({ name: 'slow', description: 'takes its time', input: z.object({}), run });

/** A call's outcome as it stands now: still running, answered, or thrown. */
function watch(p: Promise<unknown>): { state: 'running' | 'answered' | 'threw'; value?: unknown } {
  const seen: { state: 'running' | 'answered' | 'threw'; value?: unknown } = { state: 'running' };
  p.then(
    (value) => Object.assign(seen, { state: 'answered', value }),
    (value: unknown) => Object.assign(seen, { state: 'threw', value }),
  );
  return seen;
}

describe('timedTool: a call bounded to its timeout_ms', () => {
  const timeouts: CodedError[] = [];
  beforeEach(() => {
    vi.useFakeTimers();
    timeouts.length = 0;
  });
  afterEach(() => {
    vi.useRealTimers();
  });
  const onTimeout = (err: CodedError) => void timeouts.push(err);

  it('a run that never settles and ignores its signal is ended at its timeout; the caller reads the error at once', async () => {
    const t = timedTool(
      tool(() => new Promise(() => {})),
      1000,
      onTimeout,
    );
    const call = watch(Promise.resolve(t.run({}, ctxWith(new AbortController().signal))));
    await vi.advanceTimersByTimeAsync(999);
    expect(call.state).toBe('running');
    expect(timeouts).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(call).toEqual({ state: 'answered', value: { error: 'slow did not answer within 1000 ms' } });
    expect(timeouts.map((e) => e.code)).toEqual(['PLUGIN_TOOL_TIMEOUT']);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a run that honours its signal sees it aborted at the timeout, with the coded reason; what it returns after is dropped', async () => {
    let seen: AbortSignal | undefined;
    const t = timedTool(
      tool(
        (_input, ctx) =>
          new Promise((resolve) => {
            seen = ctx.signal;
            // Stops when told, but answers anyway: too late to count.
            ctx.signal.addEventListener('abort', () => resolve('a late answer'), { once: true });
          }),
      ),
      50,
      onTimeout,
    );
    const call = watch(Promise.resolve(t.run({}, ctxWith(new AbortController().signal))));
    await vi.advanceTimersByTimeAsync(50);
    expect(seen?.aborted).toBe(true);
    expect(seen?.reason).toBeInstanceOf(CodedError);
    expect(seen?.reason).toMatchObject({ code: 'PLUGIN_TOOL_TIMEOUT' });
    expect(call).toEqual({ state: 'answered', value: { error: 'slow did not answer within 50 ms' } });
    expect(timeouts).toHaveLength(1);
  });

  it('a fast call is unaffected: its result as it was, its signal never aborted, no timer left; a throw goes on up unchanged', async () => {
    let seen: AbortSignal | undefined;
    const fast = timedTool(
      tool((_input, ctx) => {
        seen = ctx.signal;
        return { knots: 12 };
      }),
      1000,
      onTimeout,
    );
    expect(await fast.run({}, ctxWith(new AbortController().signal))).toEqual({ knots: 12 });
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(5000);
    expect(seen?.aborted).toBe(false);

    const broken = new Error('the tool broke');
    const throws = timedTool(
      tool(() => {
        throw broken;
      }),
      1000,
      onTimeout,
    );
    await expect(Promise.resolve(throws.run({}, ctxWith(new AbortController().signal)))).rejects.toBe(broken);
    expect(vi.getTimerCount()).toBe(0);
    expect(timeouts).toEqual([]);
  });

  it("a call its caller stops first (/stop tool) ends with the caller's reason, and the bound is gone with it", async () => {
    const call = new AbortController();
    const t = timedTool(
      tool(() => new Promise(() => {})),
      1000,
      onTimeout,
    );
    const running = watch(Promise.resolve(t.run({}, ctxWith(call.signal))));
    await vi.advanceTimersByTimeAsync(10);
    call.abort(new CancelledByUser());
    await vi.advanceTimersByTimeAsync(0);
    expect(running.state).toBe('threw');
    expect(running.value).toBeInstanceOf(CancelledByUser);
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(2000);
    expect(timeouts).toEqual([]);
  });
});
