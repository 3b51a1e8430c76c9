import type { Dispatcher } from 'undici';
import type { SentAt } from '../contracts/channel.js';

/** An answer read whole, within a byte limit, off an undici dispatcher (a Pool or an Agent). */
export interface RawAnswer {
  status: number;
  /** The response headers by lower-case name, as undici parsed them. */
  headers: Record<string, string | string[] | undefined>;
  /** The body; undefined when it was larger than the limit (a declared length over it, or a body growing past it: not read further). */
  body: Buffer | undefined;
}

/** Where a request run under a signal notes when it went out (`whenSent`). */
const sentStamps = new WeakMap<AbortSignal, SentAt>();

/**
 * The requests `dispatchAnswer` makes under `signal` (one per-request signal, as
 * `platformCaller` gives each call) note in `sent` when undici put them on a connection, after
 * any wait for a free one: when the platform got the request, within a one-way trip, which
 * the answer comes a round trip and an event loop's lag later.
 */
export function whenSent(signal: AbortSignal, sent: SentAt): void {
  sentStamps.set(signal, sent);
}

/**
 * `fn`, a `platformCaller`'s function (its signal is the request's own), with the requests it
 * makes through `dispatchAnswer` noting in `sent`, when given, when they went out.
 */
export function notingSent<T>(sent: SentAt | undefined, fn: (signal: AbortSignal) => Promise<T>): (signal: AbortSignal) => Promise<T> {
  if (!sent) return fn;
  return (signal) => {
    whenSent(signal, sent);
    return fn(signal);
  };
}

/**
 * One request and its whole answer, straight off undici's `dispatch` (its documented handler
 * API) rather than `request`: `request` builds a readable stream, a consume promise and a
 * handler of its own for every answer on top of what dispatch does, which for the platforms'
 * small JSON calls was a fifth to a third of the client CPU of a call
 * (`test/bench/http-client.ts`; docs/PERFORMANCE.md, fifteenth round). The body is collected
 * as it comes and given whole when it ends, whatever the status. Larger than `maxBytes`
 * (declared or as it grows), the request is cut at once and the answer has no body. The
 * caller's `signal` cuts the request at any point and the promise rejects with its reason; a
 * signal already aborted sends nothing. No redirect is followed (no interceptor is involved):
 * a 3xx is an answer like any other.
 */
export function dispatchAnswer(
  dispatcher: Dispatcher,
  options: Dispatcher.DispatchOptions,
  signal: AbortSignal | undefined,
  maxBytes: number,
): Promise<RawAnswer> {
  return new Promise<RawAnswer>((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    // A tunnel answers with a socket, not a body: it would never end here.
    if (options.method === 'CONNECT' || options.upgrade) {
      reject(new TypeError(`dispatchAnswer reads answers with a body, not a tunnel (${options.method} ${options.upgrade ?? ''})`));
      return;
    }
    const handler = new BoundedAnswer(resolve, reject, signal, maxBytes, options.method === 'HEAD');
    try {
      dispatcher.dispatch(options, handler);
    } catch (err) {
      handler.onResponseError(undefined, err as Error);
    }
  });
}

/** What undici hands a dispatch handler to stop its request. */
interface Controller {
  abort(reason: Error): void;
}

/**
 * Collects one answer. It listens to the caller's signal as an object (no closure per call)
 * and stops listening as soon as the call is settled, whichever way.
 */
class BoundedAnswer {
  readonly #chunks: Buffer[] = [];
  #bytes = 0;
  #status = 0;
  #headers: RawAnswer['headers'] = {};
  #controller: Controller | undefined;
  #settled = false;

  constructor(
    private readonly resolve: (answer: RawAnswer) => void,
    private readonly reject: (err: unknown) => void,
    private readonly signal: AbortSignal | undefined,
    private readonly maxBytes: number,
    /** HEAD declares the length of a body it does not carry. */
    private readonly head: boolean,
  ) {
    signal?.addEventListener('abort', this);
  }

  /** The caller's signal aborted: settle now and cut the request (at once, or when undici starts it). */
  handleEvent(): void {
    const reason = this.signal!.reason as Error;
    this.#fail(reason);
    this.#controller?.abort(reason);
  }

  onRequestStart(controller: Controller): void {
    this.#controller = controller;
    if (this.signal?.aborted) controller.abort(this.signal.reason as Error);
    else if (this.signal) {
      const sent = sentStamps.get(this.signal);
      if (sent) sent.atMs = Date.now();
    }
  }

  onResponseStart(controller: Controller, status: number, headers: RawAnswer['headers']): void {
    // undici hands informational answers (1xx) here too: the real one follows.
    if (status < 200) return;
    this.#status = status;
    this.#headers = headers;
    // 204, 304 and a HEAD's answer carry no body whatever length they declare.
    const bodiless = this.head || status === 204 || status === 304;
    if (!bodiless && Number(headers['content-length'] ?? 0) > this.maxBytes) this.#tooLarge(controller);
  }

  onResponseData(controller: Controller, chunk: Buffer): void {
    if (this.#settled) return;
    this.#bytes += chunk.byteLength;
    if (this.#bytes > this.maxBytes) this.#tooLarge(controller);
    else this.#chunks.push(chunk);
  }

  onResponseEnd(): void {
    // Always a copy: one chunk alone is a view of the socket's read buffer, which a caller that
    // holds the answer (an SDK reading it later) would keep alive.
    this.#done({ status: this.#status, headers: this.#headers, body: Buffer.concat(this.#chunks, this.#bytes) });
  }

  onResponseError(_controller: unknown, err: Error): void {
    this.#fail(err);
  }

  #tooLarge(controller: Controller): void {
    this.#done({ status: this.#status, headers: this.#headers, body: undefined });
    // Made here, not shared: the reason also goes out on undici's diagnostics channel, with its stack.
    controller.abort(new RangeError(`the answer is larger than the ${this.maxBytes} bytes the caller reads`));
  }

  #done(answer: RawAnswer): void {
    if (this.#settle()) this.resolve(answer);
  }

  #fail(err: unknown): void {
    if (this.#settle()) this.reject(err);
  }

  /** True the first time: the call ends here, and the signal is no longer listened to. */
  #settle(): boolean {
    if (this.#settled) return false;
    this.#settled = true;
    this.#chunks.length = 0;
    this.signal?.removeEventListener('abort', this);
    return true;
  }
}
