/**
 * The waits every layer shares, each bounded by an AbortSignal. The lowest layer: it imports
 * nothing of channeld, so stages and channels/ alike may use it. All of them are built on the
 * global setTimeout, so tests' fake timers drive them, and each releases its timer and its
 * abort listener whichever way it ends.
 */

/**
 * Waits for `work` to settle (fulfilled or rejected), at most `ms` (Infinity: no time bound)
 * and no longer than until `signal` aborts. Resolves true when `work` settled, false when
 * the time ran out or the signal aborted first.
 */
export function settleWithin(work: Promise<unknown>, ms: number, signal?: AbortSignal): Promise<boolean> {
  if (signal?.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    const finish = (settled: boolean) => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      resolve(settled);
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

/**
 * Waits `ms`, or less when `signal` aborts (it then resolves; callers check the signal).
 * `onWake` gets the function that ends this wait early: how an owner that ends its own waits
 * (a reply whose turn ended) does so without an AbortController of its own, whose listener
 * table is most of what such a wait costs.
 */
export function sleep(ms: number, signal?: AbortSignal, onWake?: (wake: () => void) => void): Promise<void> {
  if (ms <= 0 || signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
    onWake?.(done);
  });
}

/**
 * Resolves once `signal` aborts (at once if it has): how a listener that has nothing else to
 * do waits for its stop. The listener goes with the abort, so only wait on a signal that ends.
 */
export function untilAborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}

/**
 * `work`'s outcome, or a rejection with `signal.reason` as soon as `signal` aborts, for a
 * client that cannot be handed the signal itself. `work` keeps running in that case, so its
 * later failure is absorbed here rather than left unhandled.
 */
export function raceAbort<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    work.catch(() => {});
    return Promise.reject(signal.reason as Error);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      work.catch(() => {});
      reject(signal.reason as Error);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err as Error);
      },
    );
  });
}
