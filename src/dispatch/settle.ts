/**
 * Waits for `work` to settle, at most `ms` (Infinity: no time bound) and no longer than
 * until `signal` aborts. Resolves true when `work` settled (fulfilled or rejected), false
 * when the time ran out or the signal aborted first; the timer and the listener are
 * released either way.
 */
export function settledWithin(work: Promise<unknown>, ms: number, signal?: AbortSignal): Promise<boolean> {
  if (signal?.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    const finish = (value: boolean) => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      resolve(value);
    };
    const onAbort = () => finish(false);
    signal?.addEventListener('abort', onAbort, { once: true });
    if (ms !== Infinity) timer = setTimeout(() => finish(false), Math.max(0, ms));
    work.then(
      () => finish(true),
      () => finish(true),
    );
  });
}
