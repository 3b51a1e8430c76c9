import { context, createContextKey, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Context, type Link, type Span } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { defaultTextMapGetter, defaultTextMapSetter } from '@opentelemetry/api';
import { ExportResultCode, W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type ReadableSpan,
  type SpanExporter,
} from '@opentelemetry/sdk-trace';
import { observePlatformCalls } from '../../util/platform-call.js';
import { installAmbient, NO_SPAN, type AmbientImpl, type Attributes, type SpanHandle, type SpanKindName } from './ambient.js';
import { platformSpanEnd } from './platform-span.js';

/**
 * The OpenTelemetry side of tracing, imported only when `[observe] otlp_endpoint` is set
 * (src/daemon/tracing.ts): everything here, and the packages it imports, stays unloaded
 * otherwise. One backend per daemon; the async-context manager and the ambient functions
 * are shared by the daemons of one process, and each traced context names the backend it
 * belongs to, so a span is always exported by the daemon whose message it follows.
 */

export interface OtelOptions {
  /** The collector's OTLP/HTTP base URL ("/v1/traces" is added unless it is already there). */
  endpoint: string;
  serviceName: string;
  sampleRatio: number;
  serviceVersion: string;
  instanceId?: string;
  /** Told when an export fails (the log line is rate-limited by the caller). */
  onExportFailed?(error: string): void;
}

/** A traced context to continue later (an item's, a turn's): opaque outside this module. */
export type TraceToken = { readonly __trace: unique symbol };

/** A span with the context it heads, for spans that start others outside the async context. */
export interface TokenSpan extends SpanHandle {
  readonly token: TraceToken;
}

export interface TraceBackend {
  /** The first span of a new trace (a message as it arrives). */
  root(name: string, attributes: Attributes, kind: SpanKindName): TokenSpan;
  /** A span under `parent`, with links to other traced contexts (items collected into one turn). */
  child(parent: TraceToken, name: string, attributes: Attributes, kind: SpanKindName, links?: readonly TraceToken[]): TokenSpan;
  /** The active context when it is one of this backend's traces. */
  capture(): TraceToken | undefined;
  /** A context continuing the trace whose W3C headers came from another instance. */
  extract(carrier: Record<string, string>): TraceToken | undefined;
  /** Exports what is buffered and stops, within `timeoutMs`; resolves false when cut short. */
  shutdown(timeoutMs: number): Promise<boolean>;
}

/** One export request may take this long. */
const EXPORT_TIMEOUT_MS = 10_000;

const OWNER = createContextKey('channeld trace owner');
const propagator = new W3CTraceContextPropagator();
const kinds: Record<SpanKindName, SpanKind> = {
  internal: SpanKind.INTERNAL,
  server: SpanKind.SERVER,
  client: SpanKind.CLIENT,
  producer: SpanKind.PRODUCER,
  consumer: SpanKind.CONSUMER,
};

const clean = (a: Attributes | undefined): Record<string, string | number | boolean> => {
  const out: Record<string, string | number | boolean> = {};
  if (a) for (const [k, v] of Object.entries(a)) if (v !== undefined) out[k] = v;
  return out;
};

function handle(span: Span, ctx: Context): TokenSpan {
  let ended = false;
  return {
    recording: span.isRecording(),
    token: ctx as unknown as TraceToken,
    set: (a) => void span.setAttributes(clean(a)),
    fail: (errorType) => {
      span.setAttribute('error.type', errorType);
      span.setStatus({ code: SpanStatusCode.ERROR });
    },
    end: () => {
      if (ended) return;
      ended = true;
      span.end();
    },
    run: (fn) => context.with(ctx, fn),
  };
}

/** A span under the active context, when that is a traced message of some backend. */
function startAmbient(name: string, attributes: Attributes | undefined, kind: SpanKindName): SpanHandle {
  const active = context.active();
  const tracer = active.getValue(OWNER) as ReturnType<TracerProvider['getTracer']> | undefined;
  const parent = trace.getSpan(active);
  // Outside a message (a listener's poll) or in an unsampled one: nothing to record.
  if (!tracer || !parent?.isRecording()) return NO_SPAN;
  const span = tracer.startSpan(name, { kind: kinds[kind], attributes: clean(attributes) }, active);
  return handle(span, trace.setSpan(active, span));
}

const ambient: AmbientImpl = {
  start: startAmbient,
  carrier: () => {
    const active = context.active();
    if (!active.getValue(OWNER) || !trace.getSpan(active)) return undefined;
    const carrier: Record<string, string> = {};
    propagator.inject(active, carrier, defaultTextMapSetter);
    return carrier.traceparent ? carrier : undefined;
  },
  ids: () => {
    const active = context.active();
    if (!active.getValue(OWNER)) return undefined;
    const sc = trace.getSpan(active)?.spanContext();
    return sc && trace.isSpanContextValid(sc) ? { trace_id: sc.traceId, span_id: sc.spanId } : undefined;
  },
};

/** What every backend of the process shares: installed with the first, removed with the last. */
let shared: { backends: number; manager: AsyncLocalStorageContextManager | undefined; uninstall: () => void } | undefined;

function acquireShared(): void {
  if (shared) {
    shared.backends++;
    return;
  }
  const manager = new AsyncLocalStorageContextManager();
  // Another OpenTelemetry set-up in this process keeps its own manager: ours then propagates through it.
  const ours = context.setGlobalContextManager(manager.enable());
  if (!ours) manager.disable();
  const uninstall = installAmbient(ambient);
  observePlatformCalls((what) => {
    const span = startAmbient(what, { 'channeld.platform.method': what }, 'client');
    return span === NO_SPAN ? undefined : platformSpanEnd(span);
  });
  shared = { backends: 1, manager: ours ? manager : undefined, uninstall };
}

function releaseShared(): void {
  if (!shared || --shared.backends > 0) return;
  shared.uninstall();
  observePlatformCalls(undefined);
  if (shared.manager) context.disable();
  shared = undefined;
}

/** The collector's traces URL: the base endpoint with "/v1/traces", as OTEL_EXPORTER_OTLP_ENDPOINT is read. */
export function tracesUrl(endpoint: string): string {
  const base = endpoint.replace(/\/+$/, '');
  return base.endsWith('/v1/traces') ? base : `${base}/v1/traces`;
}

/** Reports failed exports; the spans of a failed batch are dropped (the exporter already retried). */
function reporting(exporter: SpanExporter, onFailed: ((error: string) => void) | undefined): SpanExporter {
  return {
    export: (spans: ReadableSpan[], done) =>
      exporter.export(spans, (result) => {
        if (result.code !== ExportResultCode.SUCCESS) onFailed?.(result.error?.message ?? 'export failed');
        done(result);
      }),
    shutdown: () => exporter.shutdown(),
    forceFlush: () => exporter.forceFlush?.() ?? Promise.resolve(),
  };
}

export function createBackend(o: OtelOptions): TraceBackend {
  const provider = new TracerProvider({
    resource: resourceFromAttributes({
      'service.name': o.serviceName,
      'service.version': o.serviceVersion,
      ...(o.instanceId ? { 'service.instance.id': o.instanceId } : {}),
    }),
    // A message another instance traced stays traced there (and one it left out stays out).
    sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(o.sampleRatio) }),
    // Bounded: past 2048 spans waiting (a collector that is down) new ones are dropped.
    spanProcessors: [
      new BatchSpanProcessor({
        exporter: reporting(new OTLPTraceExporter({ url: tracesUrl(o.endpoint), timeoutMillis: EXPORT_TIMEOUT_MS }), o.onExportFailed),
        scheduledDelayMillis: 2000,
        maxQueueSize: 2048,
        exportTimeoutMillis: EXPORT_TIMEOUT_MS,
      }),
    ],
  });
  const tracer = provider.getTracer('channeld', o.serviceVersion);
  acquireShared();
  const start = (parent: Context, name: string, attributes: Attributes, kind: SpanKindName, links: Link[] = []) => {
    const span = tracer.startSpan(name, { kind: kinds[kind], attributes: clean(attributes), links }, parent);
    return handle(span, trace.setSpan(parent, span));
  };
  let closed: Promise<boolean> | undefined;
  return {
    root: (name, attributes, kind) => start(ROOT_CONTEXT.setValue(OWNER, tracer), name, attributes, kind),
    child: (parent, name, attributes, kind, links = []) => {
      const linked = links.flatMap((t) => {
        const sc = trace.getSpan(t as unknown as Context)?.spanContext();
        return sc && trace.isSpanContextValid(sc) ? [{ context: sc }] : [];
      });
      return start(parent as unknown as Context, name, attributes, kind, linked);
    },
    capture: () => {
      const active = context.active();
      return active.getValue(OWNER) === tracer && trace.getSpan(active) ? (active as unknown as TraceToken) : undefined;
    },
    extract: (carrier) => {
      const ctx = propagator.extract(ROOT_CONTEXT, carrier, defaultTextMapGetter);
      return trace.getSpan(ctx) ? (ctx.setValue(OWNER, tracer) as unknown as TraceToken) : undefined;
    },
    shutdown: (timeoutMs) =>
      (closed ??= (async () => {
        let timer: NodeJS.Timeout | undefined;
        const cut = new Promise<false>((resolve) => {
          timer = setTimeout(() => resolve(false), timeoutMs);
        });
        try {
          return await Promise.race([
            provider.shutdown().then(
              () => true,
              () => false,
            ),
            cut,
          ]);
        } finally {
          clearTimeout(timer);
          releaseShared();
        }
      })()),
  };
}
