import { ChannelError } from '../../src/contracts/errors.js';
import { httpJson } from '../../src/util/http-json.js';
import type { BotToken } from './token.js';

/** A refusal by the Connector, with its status, error code and retry-after. */
export class ConnectorError extends Error {
  constructor(
    readonly status: number,
    readonly code: string | undefined,
    readonly retryAfterMs: number | undefined,
    message: string,
  ) {
    super(message);
    this.name = 'ConnectorError';
  }
}

/** The most of a Connector answer read: resource ids and error objects are small. */
const MAX_ANSWER_BYTES = 1024 * 1024;

/** The Bot Connector REST API (v3) at an activity's serviceUrl, with the bot's token. */
export async function connectorCall<T>(
  token: BotToken,
  serviceUrl: string,
  method: 'POST' | 'PUT' | 'DELETE',
  path: string,
  body: unknown,
  signal: AbortSignal,
): Promise<T> {
  const url = `${serviceUrl.replace(/\/+$/, '')}${path}`;
  const send = async () =>
    httpJson(url, {
      method,
      headers: { authorization: `Bearer ${await token.get(signal)}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      signal,
      maxAnswerBytes: MAX_ANSWER_BYTES,
    });
  let res = await send();
  if (res.status === 401) {
    // A token revoked or rotated early: one fresh token, once.
    token.reset();
    res = await send();
  }
  if (res.tooLarge) throw new ConnectorError(res.status, undefined, undefined, `${method} ${path}: answer larger than ${MAX_ANSWER_BYTES} bytes`);
  const text = res.text;
  // An empty or non-JSON answer: fine for a 2xx, described by status otherwise.
  const json = (typeof res.json === 'object' && res.json !== null ? res.json : {}) as { error?: { code?: unknown; message?: unknown } };
  if (res.ok) return json as unknown as T;
  const header = Number(res.header('retry-after') ?? NaN);
  const code = typeof json.error?.code === 'string' ? json.error.code : undefined;
  const why = typeof json.error?.message === 'string' ? json.error.message.slice(0, 300) : text.slice(0, 200);
  throw new ConnectorError(
    res.status,
    code,
    Number.isFinite(header) ? header * 1000 : res.status === 429 ? 1000 : undefined,
    `${method} ${path}: ${res.status} ${code ?? ''} ${why}`.trim(),
  );
}

/** The one place Teams failures are sorted into the catalogue. */
export function classifyTeamsError(err: unknown, what = 'request'): ChannelError {
  if (err instanceof ChannelError) return err;
  if (err instanceof ConnectorError) {
    const detail = `Teams ${what}: ${err.message}`;
    if (err.status === 401) return new ChannelError('CHANNEL_AUTH_FAILED', `${detail}: the Connector refused the bot's token`, { cause: err });
    if (err.status === 429) return new ChannelError('CHANNEL_RATE_LIMITED', detail, { cause: err, retryAfterMs: err.retryAfterMs ?? 1000 });
    if (err.status === 403) return new ChannelError('CHANNEL_FORBIDDEN', `${detail}: the bot may not post here`, { cause: err });
    if (err.status >= 500) return new ChannelError('CHANNEL_UNAVAILABLE', detail, { cause: err });
    // Teams' rate-limiting guide: 412 (as 429, 502 and 504) is transient and is to be retried
    // with backoff. Refused for good, an update would be sent again as a second message.
    if (err.status === 412)
      return new ChannelError('CHANNEL_REQUEST_FAILED', `${detail}: Teams asks for it to be tried again`, { cause: err, retryable: true });
    return new ChannelError('CHANNEL_REQUEST_FAILED', detail, { cause: err });
  }
  return new ChannelError('CHANNEL_NETWORK', `Teams ${what}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
}
