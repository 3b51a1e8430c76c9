import { readJsonAnswer } from '../../src/util/json-answer.js';
import { GraphError, type GraphErrorBody } from './errors.js';

/** The most of a Graph API answer we read: its JSON is small (ids, a media URL). */
const MAX_ANSWER_BYTES = 256 * 1024;

/** Retry-After in seconds (or an HTTP date) as milliseconds; undefined when absent or unreadable. */
function retryAfterMs(header: string | null): number | undefined {
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
  const res = await fetch(`${o.apiRoot}/${path}`, {
    method,
    headers: { authorization: `Bearer ${o.token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal,
    redirect: 'error',
  });
  const answer = await readJsonAnswer(res, MAX_ANSWER_BYTES);
  if (answer === 'too_large') throw new GraphError(res.status, { message: `answer larger than ${MAX_ANSWER_BYTES} bytes` }, undefined);
  const { text, json } = answer;
  if (!res.ok) {
    const error = (json as { error?: GraphErrorBody } | undefined)?.error ?? { message: text.slice(0, 200) || res.statusText };
    throw new GraphError(res.status, error, retryAfterMs(res.headers.get('retry-after')));
  }
  if (json === undefined) throw new GraphError(res.status, { message: 'the answer is not JSON' }, undefined);
  return json as T;
}
