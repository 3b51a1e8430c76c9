import { headers, type MsgHdrs } from '@nats-io/transport-node';
import { traceCarrier } from '../observe/trace/ambient.js';

/** The W3C trace context headers a traced message carries from one instance to the next. */
const TRACE_HEADERS = ['traceparent', 'tracestate'] as const;
/** A header past this is not a trace context: ignored, not parsed. */
const MAX_HEADER_CHARS = 512;

/** NATS headers holding the active message's trace context; undefined when nothing is traced. */
export function natsTraceHeaders(): MsgHdrs | undefined {
  const carrier = traceCarrier();
  if (!carrier) return undefined;
  const h = headers();
  for (const k of TRACE_HEADERS) if (carrier[k]) h.set(k, carrier[k]);
  return h;
}

/** The trace context a stream message carried, if any. */
export function carrierOf(h: MsgHdrs | undefined): Record<string, string> | undefined {
  const parent = h?.get('traceparent');
  if (!parent || parent.length > MAX_HEADER_CHARS) return undefined;
  const state = h?.get('tracestate');
  return { traceparent: parent, ...(state && state.length <= MAX_HEADER_CHARS ? { tracestate: state } : {}) };
}
