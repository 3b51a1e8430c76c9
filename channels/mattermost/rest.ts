import { readJsonAnswer } from '../../src/util/json-answer.js';
import { MattermostApiError } from './errors.js';

/** The most of a REST answer we read: a page of posts is the largest. */
const MAX_ANSWER_BYTES = 8 * 1024 * 1024;

/** How long a 429 asks us to wait: Retry-After, else X-Ratelimit-Reset (seconds), else undefined. */
function waitOf(headers: Headers): number | undefined {
  for (const name of ['retry-after', 'x-ratelimit-reset']) {
    const v = Number(headers.get(name));
    if (headers.get(name) !== null && Number.isFinite(v) && v >= 0) return Math.ceil(v * 1000);
  }
  return undefined;
}

/** One Mattermost REST call (`/api/v4/...`) with the bot's bearer token: JSON in, JSON out, with the server's Date. */
export async function mattermostRequest<T>(
  o: { url: string; token: string },
  method: 'GET' | 'POST' | 'PUT' | 'DELETE',
  path: string,
  body: unknown,
  signal: AbortSignal,
): Promise<{ data: T; serverTimeMs: number | undefined }> {
  const res = await fetch(`${o.url}/api/v4/${path}`, {
    method,
    headers: {
      authorization: `Bearer ${o.token}`,
      // Mattermost asks non-browser clients to say so (its CSRF check skips them).
      'x-requested-with': 'XMLHttpRequest',
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal,
    redirect: 'error',
  });
  const answer = await readJsonAnswer(res, MAX_ANSWER_BYTES);
  if (answer === 'too_large') throw new MattermostApiError(res.status, undefined, `answer larger than ${MAX_ANSWER_BYTES} bytes`, undefined);
  const { text, json } = answer;
  if (!res.ok) {
    const e = (json ?? {}) as { id?: string; message?: string };
    throw new MattermostApiError(res.status, e.id, e.message ?? (text.slice(0, 200) || res.statusText), waitOf(res.headers));
  }
  if (json === undefined) throw new MattermostApiError(res.status, undefined, 'the answer is not JSON', undefined);
  const date = Date.parse(res.headers.get('date') ?? '');
  return { data: json as T, serverTimeMs: Number.isFinite(date) ? date : undefined };
}
