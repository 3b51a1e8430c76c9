import { ChannelError } from '../contracts/errors.js';
import { raceAbort } from './abortable.js';

/**
 * How long one platform request may take before it is cut: long enough for a large message
 * on a slow link, short enough that a hung request cannot hold a conversation's lane.
 */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;

/** A platform's own mapping of a failure (its SDK's error types) to the catalogue. */
export type ClassifyError = (err: unknown, what: string) => ChannelError;

/**
 * Runs one platform request named `what` (the API method, for messages): `fn` gets a signal
 * that aborts when the caller's does or after the request timeout.
 */
export type PlatformCall = <T>(what: string, signal: AbortSignal, fn: (signal: AbortSignal) => Promise<T>) => Promise<T>;

/**
 * Told when a platform request starts (tracing, when `[observe] otlp_endpoint` is set);
 * returns what to tell when it ends, or undefined when the request is not followed.
 */
export type PlatformCallObserver = (what: string) => ((outcome: { error?: unknown }) => void) | undefined;

let observer: PlatformCallObserver | undefined;

/** Sets (or with undefined, clears) the one observer of every adapter's platform requests. */
export function observePlatformCalls(next: PlatformCallObserver | undefined): void {
  observer = next;
}

/** How a caller's requests behave on an abort. */
export interface PlatformCallerOptions {
  /**
   * Every `fn` this caller runs settles as soon as the signal it is given aborts (its client
   * takes the signal and rejects at once, as `dispatchAnswer` does), so the result is not
   * raced with the signal: a promise, a listener and three closures fewer per request, on
   * the calls a reply makes per message. Leave it off for any client that may ignore the signal.
   */
  settlesOnAbort?: boolean;
}

/**
 * The part of every adapter's transport calls that is not about its platform. The result is
 * raced with the request's signal, so a client that ignores (or cannot take) a signal is cut
 * too (unless `settlesOnAbort`). A caller's abort rejects with its reason, untouched; running
 * out of time is CHANNEL_REQUEST_TIMEOUT (retryable); any other failure goes through
 * `classify`, which carries a 429's retry-after as `retryAfterMs`.
 */
export function platformCaller(classify: ClassifyError, timeoutMs = DEFAULT_REQUEST_TIMEOUT_MS, o: PlatformCallerOptions = {}): PlatformCall {
  const race = !o.settlesOnAbort;
  return async <T>(what: string, signal: AbortSignal, fn: (signal: AbortSignal) => Promise<T>): Promise<T> => {
    signal.throwIfAborted();
    const observed = observer?.(what);
    const request = new AbortController();
    const onAbort = () => request.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    // Built only when it happens: an error's stack costs more than the request's bookkeeping.
    let timedOut: ChannelError | undefined;
    const timer = setTimeout(() => {
      timedOut = new ChannelError('CHANNEL_REQUEST_TIMEOUT', `${what} got no answer within ${timeoutMs} ms`);
      request.abort(timedOut);
    }, timeoutMs);
    try {
      const work = fn(request.signal);
      const answer = await (race ? raceAbort(work, request.signal) : work);
      observed?.({});
      return answer;
    } catch (err) {
      const failure: unknown = signal.aborted ? signal.reason : (timedOut ?? classify(err, what));
      observed?.({ error: failure });
      throw failure;
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    }
  };
}
