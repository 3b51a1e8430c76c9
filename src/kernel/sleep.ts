/**
 * Waits `ms`, or less when `signal` aborts (it then resolves; callers check the signal).
 * Built on the global setTimeout so tests' fake timers drive it; the timer and the
 * listener are both released whichever comes first.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (ms <= 0 || signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
