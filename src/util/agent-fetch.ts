import { dispatchAnswer } from './dispatch-answer.js';
import { platformAgent } from './http-json.js';

/** The most of an answer an SDK reads through agentFetch (a page of history is the largest). */
const MAX_ANSWER_BYTES = 8 * 1024 * 1024;

/**
 * A `fetch` for an SDK that takes one (a chat platform's web API client), over the process's undici agent
 * (src/util/http-json.ts) instead of global `fetch`, which builds a WHATWG Request, Headers and
 * a web stream for every call: about 3× the client CPU of a small JSON call. A string or
 * URLSearchParams body goes this way; any other body (FormData, a stream: file uploads) and any
 * redirect mode but 'error' and 'manual' go through global `fetch`, as before. The answer has
 * what such SDKs read (`ok`, `status`, `statusText`, `headers`, `url`, `text()`, `json()`,
 * `arrayBuffer()`), its body read whole within MAX_ANSWER_BYTES before it is returned; a
 * redirect is returned, not followed. (node:http is taken with
 * process.getBuiltinModule: see src/observe/http-server.ts.)
 */
export async function agentFetch(input: string | URL | Request, init: RequestInit = {}): Promise<Response> {
  const body = init.body;
  const plainBody = body === undefined || body === null || typeof body === 'string' || body instanceof URLSearchParams;
  if (input instanceof Request || !plainBody || (init.redirect !== undefined && init.redirect !== 'error' && init.redirect !== 'manual'))
    return fetch(input, init);
  const url = new URL(input);
  const headers = new Headers(init.headers);
  if (body instanceof URLSearchParams && !headers.has('content-type')) headers.set('content-type', 'application/x-www-form-urlencoded;charset=UTF-8');
  // Read whole before the SDK sees the answer (within MAX_ANSWER_BYTES): the connection goes
  // back to the agent at once, and a too-large answer is refused when the SDK reads it.
  const res = await dispatchAnswer(
    platformAgent(),
    {
      origin: url.origin,
      path: `${url.pathname}${url.search}`,
      method: (init.method ?? 'GET') as 'GET',
      headers: Object.fromEntries(headers),
      ...(body !== undefined && body !== null ? { body: String(body) } : {}),
    },
    init.signal ?? undefined,
    MAX_ANSWER_BYTES,
  );
  const answerHeaders = new Headers();
  for (const [k, v] of Object.entries(res.headers)) {
    if (Array.isArray(v)) for (const one of v) answerHeaders.append(k, one);
    else if (v !== undefined) answerHeaders.set(k, v);
  }
  const bytes = async () => {
    if (!res.body) throw new RangeError(`the answer from ${url.origin} is larger than ${MAX_ANSWER_BYTES} bytes`);
    return res.body;
  };
  const status = res.status;
  return {
    ok: status >= 200 && status < 300,
    status,
    statusText: process.getBuiltinModule('node:http').STATUS_CODES[status] ?? '',
    headers: answerHeaders,
    url: url.href,
    redirected: false,
    text: async () => (await bytes()).toString('utf8'),
    json: async () => JSON.parse((await bytes()).toString('utf8')) as unknown,
    arrayBuffer: async () => {
      const b = await bytes();
      return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength);
    },
  } as unknown as Response;
}
