import { type HttpAnswer, httpJson } from '../../src/util/http-json.js';
import { MattermostAnswerTooLarge, MattermostApiError } from './errors.js';

/** The most of a REST answer we read: a page of posts is the largest (the catch-up asks for a smaller page past it). */
export const MAX_ANSWER_BYTES = 8 * 1024 * 1024;

/** How long a 429 asks us to wait: Retry-After, else X-Ratelimit-Reset (seconds), else undefined. */
export function waitOf(answer: Pick<HttpAnswer, 'header'>): number | undefined {
  for (const name of ['retry-after', 'x-ratelimit-reset']) {
    const header = answer.header(name);
    const v = Number(header);
    if (header !== undefined && Number.isFinite(v) && v >= 0) return Math.ceil(v * 1000);
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
  const answer = await httpJson(`${o.url}/api/v4/${path}`, {
    method,
    headers: {
      authorization: `Bearer ${o.token}`,
      // Mattermost asks non-browser clients to say so (its CSRF check skips them).
      'x-requested-with': 'XMLHttpRequest',
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal,
    maxAnswerBytes: MAX_ANSWER_BYTES,
  });
  const { status, text, json } = answer;
  if (answer.tooLarge) throw new MattermostAnswerTooLarge(status, MAX_ANSWER_BYTES);
  if (!answer.ok) {
    const e = (json ?? {}) as { id?: string; message?: string };
    throw new MattermostApiError(status, e.id, e.message ?? (text.slice(0, 200) || `HTTP ${status}`), waitOf(answer));
  }
  if (json === undefined) throw new MattermostApiError(status, undefined, 'the answer is not JSON', undefined);
  const date = Date.parse(answer.header('date') ?? '');
  return { data: json as T, serverTimeMs: Number.isFinite(date) ? date : undefined };
}
