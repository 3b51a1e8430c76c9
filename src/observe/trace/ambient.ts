/**
 * Tracing as code deep in a message's path sees it: start a span under the traced message
 * this code runs for, hand its context to another instance, put its ids on a log line. It
 * never imports OpenTelemetry: `otel.ts` (loaded only when `[observe] otlp_endpoint` is set)
 * installs the implementation. Until then, and outside a traced message, every call is a
 * no-op that costs one check. Attributes never hold message text.
 */

export type AttributeValue = string | number | boolean;
export type Attributes = Record<string, AttributeValue | undefined>;

/** SpanKind of OpenTelemetry by name, so callers need not import its enum. */
export type SpanKindName = 'internal' | 'server' | 'client' | 'producer' | 'consumer';

/** One span in progress. `end` may be called more than once; only the first counts. */
export interface SpanHandle {
  /** Whether this span is exported (false for the no-op and for unsampled traces). */
  readonly recording: boolean;
  set(attributes: Attributes): void;
  /** Marks the span failed with a catalogue code (or another short error type), never a message. */
  fail(errorType: string): void;
  end(): void;
  /** Runs `fn` with this span as the parent of what it starts. */
  run<T>(fn: () => T): T;
}

/** What `otel.ts` installs. Each call looks up the traced message active in the async context. */
export interface AmbientImpl {
  start(name: string, attributes: Attributes | undefined, kind: SpanKindName): SpanHandle;
  carrier(): Record<string, string> | undefined;
  ids(): { trace_id: string; span_id: string } | undefined;
}

export const NO_SPAN: SpanHandle = {
  recording: false,
  set: () => {},
  fail: () => {},
  end: () => {},
  run: (fn) => fn(),
};

let impl: AmbientImpl | undefined;
let installs = 0;

/** Installs the implementation; the returned function uninstalls it when the last installer leaves. */
export function installAmbient(next: AmbientImpl): () => void {
  impl = next;
  installs++;
  let done = false;
  return () => {
    if (done) return;
    done = true;
    if (--installs === 0) impl = undefined;
  };
}

/** A span under the traced message active now; NO_SPAN outside one or when tracing is off. */
export function startSpan(name: string, attributes?: Attributes, kind: SpanKindName = 'internal'): SpanHandle {
  return impl ? impl.start(name, attributes, kind) : NO_SPAN;
}

/** Runs `fn` (sync or async) in a span under the active traced message; a throw marks it failed. */
export async function inSpan<T>(
  name: string,
  attributes: Attributes | undefined,
  fn: (span: SpanHandle) => Promise<T>,
  kind: SpanKindName = 'internal',
): Promise<T> {
  const span = startSpan(name, attributes, kind);
  if (span === NO_SPAN) return fn(span);
  try {
    return await span.run(() => fn(span));
  } catch (err) {
    span.fail(errorType(err));
    throw err;
  } finally {
    span.end();
  }
}

/** W3C trace context headers (`traceparent`, `tracestate`) of the active traced message, to send along. */
export function traceCarrier(): Record<string, string> | undefined {
  return impl?.carrier();
}

/** `trace_id` and `span_id` for a log line written inside a traced message. */
export function traceIds(): { trace_id: string; span_id: string } | undefined {
  return impl?.ids();
}

/**
 * Context that arrived with a message from another instance (its NATS headers), kept with
 * the message object until the dispatcher queues it: the queued item's trace continues it.
 */
const remoteParents = new WeakMap<object, Record<string, string>>();

export function rememberCarrier(message: object, carrier: Record<string, string> | undefined): void {
  if (impl && carrier) remoteParents.set(message, carrier);
}

export function takeCarrier(message: object): Record<string, string> | undefined {
  const c = remoteParents.get(message);
  if (c) remoteParents.delete(message);
  return c;
}

/** A short error type for a span: a catalogue code, else the error's class name; never its message. */
export function errorType(err: unknown): string {
  if (err && typeof err === 'object') {
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string' && /^[A-Z][A-Z0-9_]{2,63}$/.test(code)) return code;
    const name = (err as { name?: unknown }).name;
    if (typeof name === 'string' && name.length <= 64) return name;
  }
  return 'Error';
}
