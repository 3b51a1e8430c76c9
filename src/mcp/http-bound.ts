import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { CodedError } from '../contracts/errors.js';
import { EventBytes } from '../agent/output-cap.js';
import { readCapped } from '../util/read-capped.js';
import { thinProgressEvents } from './sse-progress.js';
import { MAX_STDIO_MESSAGE_BYTES } from './stdio-buffer.js';

/** Bytes one message from a Streamable HTTP server may have: the stdio bound. */
export const MAX_HTTP_MESSAGE_BYTES = MAX_STDIO_MESSAGE_BYTES;
/** Bytes of a refusal's body kept (4xx, 5xx): it only becomes the error's message. */
export const MAX_HTTP_ERROR_BODY_BYTES = 4096;
/**
 * The JSON-RPC error code of the answer put in place of one past the bound, from the range
 * JSON-RPC leaves to implementations (MCP's own codes there are -32000 to -32002 and -32042).
 */
export const ANSWER_TOO_LARGE = -32099;

/**
 * A fetch for the SDK's Streamable HTTP transport that bounds what a server's answers may
 * hold, as the stdio transport's buffer does: the SDK reads a JSON answer whole and buffers a
 * server-sent event until it ends, so a tool answering 1 GB would be held in memory before
 * any result bound could cut it. An answer to a request that passes `maxBytes` (a JSON body,
 * or one event of a stream) is replaced by a JSON-RPC error for that request
 * (`ANSWER_TOO_LARGE`), so the call fails at once instead of waiting for its timeout; an
 * event of the stream the server opens on its own ends that stream (the SDK opens it again).
 * A stream's progress notifications are thinned before the SDK parses them (thinProgressEvents).
 */
export function boundedMcpFetch(maxBytes = MAX_HTTP_MESSAGE_BYTES, inner: FetchLike = fetch): FetchLike {
  return async (url, init) => {
    const res = await inner(url, init);
    // Redirects (the SDK follows or reports them) and answers without a body stay as they are.
    if (!res.body || res.status < 200 || res.status === 204 || res.status === 205 || (res.status >= 300 && res.status < 400)) return res;
    const headers = new Headers(res.headers);
    headers.delete('content-length');
    const rebuilt = (body: ConstructorParameters<typeof Response>[0]) => new Response(body, { status: res.status, statusText: res.statusText, headers });
    if (res.status >= 400) return rebuilt(await readHead(res.body, MAX_HTTP_ERROR_BODY_BYTES));
    const ids = () => requestIds(init?.body);
    // Bounded first, so the thinning (which holds an event whole) never holds more than one bounded event.
    if (mediaType(res.headers.get('content-type')) === 'text/event-stream')
      return rebuilt(res.body.pipeThrough(eventBound(maxBytes, ids)).pipeThrough(thinProgressEvents()));
    try {
      return rebuilt(new Uint8Array(await readCapped(res, maxBytes, () => new AnswerTooLarge())));
    } catch (err) {
      if (!(err instanceof AnswerTooLarge)) throw err;
      headers.set('content-type', 'application/json');
      return rebuilt(JSON.stringify(tooLargeAnswers(ids(), maxBytes)));
    }
  };
}

class AnswerTooLarge extends Error {}

/** JSON-RPC errors in place of the answers to `ids`. */
function tooLargeAnswers(ids: readonly (string | number)[], maxBytes: number): object[] {
  return ids.map((id) => ({ jsonrpc: '2.0', id, error: { code: ANSWER_TOO_LARGE, message: `the MCP server's answer passed ${maxBytes} bytes` } }));
}

/** The ids of the requests in a POST body the SDK sent (one message or a batch, as JSON text). */
function requestIds(body: unknown): (string | number)[] {
  if (typeof body !== 'string') return [];
  try {
    const parsed: unknown = JSON.parse(body);
    return (Array.isArray(parsed) ? parsed : [parsed]).flatMap((m: unknown) => {
      const msg = m as { method?: unknown; id?: unknown } | null;
      return msg && typeof msg.method === 'string' && (typeof msg.id === 'string' || typeof msg.id === 'number') ? [msg.id] : [];
    });
  } catch {
    return [];
  }
}

function mediaType(contentType: string | null): string {
  return (contentType ?? '').split(';')[0]!.trim().toLowerCase();
}

/** The first `maxBytes` of a body; the rest is not read. */
async function readHead(body: ReadableStream<Uint8Array>, maxBytes: number): Promise<Uint8Array> {
  const reader = body.getReader();
  const parts: Uint8Array[] = [];
  let total = 0;
  try {
    while (total < maxBytes) {
      const { done, value } = await reader.read();
      if (done) break;
      parts.push(value.subarray(0, maxBytes - total));
      total += Math.min(value.byteLength, maxBytes - total);
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  return new Uint8Array(Buffer.concat(parts));
}

/**
 * Passes a server-sent event stream through, counting each event's bytes (up to its blank
 * line; CR, LF or CRLF line ends). Past `maxBytes` the event is ended as one the SDK skips
 * (an event type other than `message`), the requests' errors follow, and the stream ends
 * (its source is cancelled); with no request to answer, the stream fails instead.
 */
function eventBound(maxBytes: number, ids: () => (string | number)[]): TransformStream<Uint8Array, Uint8Array> {
  const bytes = new EventBytes();
  return new TransformStream({
    transform(chunk, controller) {
      const over = bytes.overAt(chunk, maxBytes);
      if (over < 0) {
        controller.enqueue(chunk);
        return;
      }
      const answers = tooLargeAnswers(ids(), maxBytes);
      if (answers.length === 0) {
        controller.error(new CodedError('MCP_ANSWER_TOO_LARGE', `one server-sent event of the MCP server passed ${maxBytes} bytes`));
        return;
      }
      controller.enqueue(chunk.subarray(0, over));
      const frames = `\nevent: dropped\n\n${answers.map((a) => `data: ${JSON.stringify(a)}\n\n`).join('')}`;
      controller.enqueue(new TextEncoder().encode(frames));
      controller.terminate();
    },
  });
}
