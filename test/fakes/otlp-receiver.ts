import type { IncomingMessage, ServerResponse } from 'node:http';
import { FakeHttpServer } from './http-fake.js';

type AnyValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };

/** One span as the receiver decoded it from OTLP/JSON. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** Empty for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP's SpanKind number: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  attributes: Record<string, string | number | boolean>;
  links: Array<{ traceId: string; spanId: string }>;
  /** OTLP's status code: 0 unset, 1 ok, 2 error. */
  status: number;
  /** The `service.name` and `service.instance.id` of the resource that sent it. */
  service: string;
  instance: string | undefined;
}

const decoded = (v: AnyValue | undefined): string | number | boolean => {
  if (!v) return '';
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.boolValue !== undefined) return v.boolValue;
  return JSON.stringify(v);
};

const attributesOf = (list: Array<{ key: string; value: AnyValue }> | undefined) => Object.fromEntries((list ?? []).map((a) => [a.key, decoded(a.value)]));

/**
 * An OpenTelemetry collector's OTLP/HTTP receiver on 127.0.0.1: `POST /v1/traces` with an
 * `ExportTraceServiceRequest` in OTLP/JSON (what @opentelemetry/exporter-trace-otlp-http
 * sends), decoded into spans; every raw body is kept too, to search the whole export.
 */
export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  readonly bodies: string[] = [];
  readonly #http = new FakeHttpServer((req, res) => this.#handle(req, res));
  /** Requests taken and never answered (a collector that hangs), counted. */
  hung = 0;

  /** `hang`: read each request and never answer it, until `close` cuts the connections. */
  constructor(private readonly options: { hang?: boolean } = {}) {}

  get url(): string {
    return this.#http.url;
  }

  start(): Promise<string> {
    return this.#http.listen();
  }

  close(): Promise<void> {
    return this.#http.close();
  }

  /** The spans of one trace. */
  trace(traceId: string): ReceivedSpan[] {
    return this.spans.filter((s) => s.traceId === traceId);
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    if (req.method !== 'POST' || req.url !== '/v1/traces') {
      res.writeHead(404).end();
      return;
    }
    if (!String(req.headers['content-type']).startsWith('application/json')) {
      res.writeHead(415, { 'content-type': 'application/json' }).end(JSON.stringify({ message: 'this receiver decodes OTLP/JSON only' }));
      return;
    }
    if (this.options.hang) {
      this.hung++;
      return;
    }
    this.bodies.push(body);
    const request = JSON.parse(body) as {
      resourceSpans?: Array<{
        resource?: { attributes?: Array<{ key: string; value: AnyValue }> };
        scopeSpans?: Array<{
          spans?: Array<{
            traceId: string;
            spanId: string;
            parentSpanId?: string;
            name: string;
            kind: number;
            attributes?: Array<{ key: string; value: AnyValue }>;
            links?: Array<{ traceId: string; spanId: string }>;
            status?: { code?: number };
          }>;
        }>;
      }>;
    };
    for (const rs of request.resourceSpans ?? []) {
      const resource = attributesOf(rs.resource?.attributes);
      for (const ss of rs.scopeSpans ?? [])
        for (const s of ss.spans ?? [])
          this.spans.push({
            traceId: s.traceId,
            spanId: s.spanId,
            parentSpanId: s.parentSpanId ?? '',
            name: s.name,
            kind: s.kind,
            attributes: attributesOf(s.attributes),
            links: (s.links ?? []).map((l) => ({ traceId: l.traceId, spanId: l.spanId })),
            status: s.status?.code ?? 0,
            service: String(resource['service.name']),
            instance: resource['service.instance.id'] === undefined ? undefined : String(resource['service.instance.id']),
          });
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  }
}
