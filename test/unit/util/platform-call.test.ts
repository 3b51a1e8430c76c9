import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { getEventListeners } from 'node:events';
import { ChannelError } from '../../../src/contracts/errors.js';
import { platformCaller } from '../../../src/util/platform-call.js';

const listeners = (signal: AbortSignal) => getEventListeners(signal, 'abort').length;
const never = <T>() => new Promise<T>(() => {});
const classify = (err: unknown, what: string) =>
  new ChannelError('CHANNEL_REQUEST_FAILED', `${what}: ${String((err as Error).message)}`, { cause: err, retryAfterMs: 7 });

describe('platformCaller', () => {
  beforeEach(() => vi.useFakeTimers({ now: 0 }));
  afterEach(() => vi.useRealTimers());

  it('a request that never answers is cut at the timeout as CHANNEL_REQUEST_TIMEOUT, and its signal aborts', async () => {
    const call = platformCaller(classify, 5000);
    const c = new AbortController();
    let inner: AbortSignal | undefined;
    const p = call('chat.postMessage', c.signal, (s) => ((inner = s), never()));
    const caught = p.catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(4999);
    expect(inner!.aborted).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    const err = await caught;
    expect(err).toMatchObject({ code: 'CHANNEL_REQUEST_TIMEOUT', retryable: true });
    expect((err as Error).message).toContain('chat.postMessage got no answer within 5000 ms');
    expect(inner!.aborted).toBe(true);
    expect(listeners(c.signal)).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("the caller's abort rejects with its reason, untouched by the platform's mapping", async () => {
    const call = platformCaller(classify, 5000);
    const c = new AbortController();
    const p = call('edit', c.signal, () => never());
    const reason = new Error('turn stopped');
    c.abort(reason);
    await expect(p).rejects.toBe(reason);
    await expect(call('edit', c.signal, async () => 1)).rejects.toBe(reason);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("other failures go through the platform's mapping; a success clears the timer and the listener", async () => {
    const call = platformCaller(classify, 5000);
    const c = new AbortController();
    await expect(call('send', c.signal, async () => Promise.reject(new Error('429')))).rejects.toMatchObject({
      code: 'CHANNEL_REQUEST_FAILED',
      retryAfterMs: 7,
      message: expect.stringContaining('send: 429'),
    });
    await expect(call('send', c.signal, async () => 'ok')).resolves.toBe('ok');
    expect(listeners(c.signal)).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('settlesOnAbort: a client that takes the signal is not raced, and aborts and timeouts still end the call as above', async () => {
    const call = platformCaller(classify, 5000, { settlesOnAbort: true });
    // A client that honours its signal, as dispatchAnswer does: it rejects with the reason at once.
    const honours = (s: AbortSignal) =>
      new Promise<never>((_resolve, reject) => s.addEventListener('abort', () => reject(new Error('cut', { cause: s.reason })), { once: true }));
    const c = new AbortController();
    const p = call('sendMessage', c.signal, honours);
    const reason = new Error('turn stopped');
    c.abort(reason);
    await expect(p).rejects.toBe(reason);
    const timedOut = call('sendMessage', new AbortController().signal, honours).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(5000);
    expect(await timedOut).toMatchObject({ code: 'CHANNEL_REQUEST_TIMEOUT' });
    const d = new AbortController();
    await expect(call('sendMessage', d.signal, async () => Promise.reject(new Error('502')))).rejects.toMatchObject({ code: 'CHANNEL_REQUEST_FAILED' });
    await expect(call('sendMessage', d.signal, async () => 'ok')).resolves.toBe('ok');
    expect(listeners(d.signal)).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });
});
