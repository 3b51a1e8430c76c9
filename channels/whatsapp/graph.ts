import { httpJson } from '../../src/util/http-json.js';
import { GraphError, type GraphErrorBody } from './errors.js';

/** The most of a Graph API answer we read: its JSON is small (ids, a media URL). */
const MAX_ANSWER_BYTES = 256 * 1024;

/** Retry-After in seconds (or an HTTP date) as milliseconds; undefined when absent or unreadable. */
function retryAfterMs(header: string | undefined): number | undefined {
  if (!header) return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds) && seconds >= 0) return Math.ceil(seconds * 1000);
  const at = Date.parse(header);
  return Number.isFinite(at) ? Math.max(0, at - Date.now()) : undefined;
}

/**
 * One Graph API request with the bearer token: JSON in, JSON out. A non-2xx answer throws
 * a GraphError with the platform's error object and Retry-After, for classifyWhatsAppError.
 */
export async function graphRequest<T>(
  o: { apiRoot: string; token: string },
  method: 'GET' | 'POST',
  path: string,
  body: unknown,
  signal: AbortSignal,
): Promise<T> {
  const answer = await httpJson(`${o.apiRoot}/${path}`, {
    method,
    headers: { authorization: `Bearer ${o.token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal,
    maxAnswerBytes: MAX_ANSWER_BYTES,
  });
  const { status, text, json } = answer;
  if (answer.tooLarge) throw new GraphError(status, { message: `answer larger than ${MAX_ANSWER_BYTES} bytes` }, undefined);
  if (!answer.ok) {
    const error = (json as { error?: GraphErrorBody } | undefined)?.error ?? { message: text.slice(0, 200) || `HTTP ${status}` };
    throw new GraphError(status, error, retryAfterMs(answer.header('retry-after')));
  }
  if (json === undefined) throw new GraphError(status, { message: 'the answer is not JSON' }, undefined);
  return json as T;
}
