import { ChannelError } from '../../src/contracts/errors.js';

/**
 * A REST answer that was not 2xx: Mattermost's AppError body (`id`, `message`) and the wait a 429
 * asked for. `inList`: the AppError came inside a list answered 200 (channel-list.ts); `status`
 * is then its `status_code`, not the HTTP status, and says nothing of whether the route exists.
 */
export class MattermostApiError extends Error {
  constructor(
    readonly status: number,
    readonly errorId: string | undefined,
    detail: string,
    readonly retryAfterMs: number | undefined,
    readonly inList = false,
  ) {
    super(`HTTP ${status}${errorId ? ` ${errorId}` : ''}: ${detail}`);
    this.name = 'MattermostApiError';
  }
}

/**
 * An answer larger than the bound rest.ts reads (not read), or a part of one over its own bound
 * (`what`: a channel of a list, channel-list.ts): sorted like any refused request, but a reader
 * of pages (catch-up.ts) can tell it apart and ask for a smaller page.
 */
export class MattermostAnswerTooLarge extends MattermostApiError {
  constructor(
    status: number,
    readonly maxBytes: number,
    what = 'answer',
  ) {
    super(status, undefined, `${what} larger than ${maxBytes} bytes`, undefined);
    this.name = 'MattermostAnswerTooLarge';
  }
}

/**
 * A part of an answer nested deeper than its reader allows (channel-list.ts): each level costs
 * the streaming parser memory, which the byte bounds alone would let grow a hundredfold.
 */
export class MattermostAnswerTooDeep extends MattermostApiError {
  constructor(
    status: number,
    readonly maxDepth: number,
    what: string,
  ) {
    super(status, undefined, `${what} nested deeper than ${maxDepth} levels`, undefined);
    this.name = 'MattermostAnswerTooDeep';
  }
}

/** The one place Mattermost failures are sorted: by HTTP status, then network. */
export function classifyMattermostError(err: unknown, what = 'request'): ChannelError {
  if (err instanceof ChannelError) return err;
  if (err instanceof MattermostApiError) {
    const detail = `Mattermost ${what}: ${err.message}`;
    // The request was taken (its 200 sent): the server failed reading its store half-way, whatever status_code it wrote.
    if (err.inList) return new ChannelError('CHANNEL_UNAVAILABLE', detail, { cause: err });
    if (err.status === 401)
      return new ChannelError('CHANNEL_AUTH_FAILED', `${detail}: the token was refused; check token_env/token_file and that the bot account is enabled`, {
        cause: err,
      });
    if (err.status === 429) return new ChannelError('CHANNEL_RATE_LIMITED', detail, { cause: err, retryAfterMs: err.retryAfterMs ?? 1000 });
    if (err.status === 403)
      return new ChannelError('CHANNEL_FORBIDDEN', `${detail}: the bot lacks a permission or is not a member of the channel`, { cause: err });
    if (err.status >= 500) return new ChannelError('CHANNEL_UNAVAILABLE', detail, { cause: err });
    return new ChannelError('CHANNEL_REQUEST_FAILED', detail, { cause: err });
  }
  return new ChannelError('CHANNEL_NETWORK', `Mattermost ${what}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
}
