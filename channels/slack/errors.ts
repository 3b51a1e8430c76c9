import { ErrorCode, type WebAPICallError } from '@slack/web-api';
import { ChannelError } from '../../src/contracts/errors.js';
import { networkCause } from '../../src/util/network-cause.js';

/** Slack error strings after which retrying cannot help. */
const FATAL = new Set([
  'invalid_auth',
  'not_authed',
  'account_inactive',
  'token_revoked',
  'team_disabled',
  'token_expired',
  'not_allowed_token_type',
  'missing_scope',
]);

/** A Slack error string after which retrying cannot help, as CHANNEL_AUTH_FAILED; undefined for any other. */
export function slackRefusal(code: string, what: string, cause?: unknown): ChannelError | undefined {
  if (!FATAL.has(code)) return undefined;
  return new ChannelError(
    'CHANNEL_AUTH_FAILED',
    `Slack ${what}: ${code}: the token was refused or lacks a scope; check bot_token_*/app_token_* and the app's OAuth scopes`,
    { cause },
  );
}

/** One place where Slack failures are sorted: platform errors by their string, then HTTP, rate limits, network. */
export function classifySlackError(err: unknown, what = 'request'): ChannelError {
  if (err instanceof ChannelError) return err;
  const e = err as Partial<WebAPICallError> & { message?: string };
  switch (e.code) {
    case ErrorCode.PlatformError: {
      const code = (e as { data?: { error?: string } }).data?.error ?? 'unknown_error';
      const refused = slackRefusal(code, what, err);
      if (refused) return refused;
      if (code === 'ratelimited') return new ChannelError('CHANNEL_RATE_LIMITED', `Slack ${what}: ratelimited`, { cause: err, retryAfterMs: 1000 });
      return new ChannelError('CHANNEL_REQUEST_FAILED', `Slack ${what}: ${code}`, { cause: err });
    }
    case ErrorCode.RateLimitedError:
      return new ChannelError('CHANNEL_RATE_LIMITED', `Slack ${what}: rate limited`, {
        cause: err,
        retryAfterMs: ((e as { retryAfter?: number }).retryAfter ?? 1) * 1000,
      });
    case ErrorCode.HTTPError: {
      const status = (e as { statusCode?: number }).statusCode ?? 0;
      return status >= 500
        ? new ChannelError('CHANNEL_UNAVAILABLE', `Slack ${what}: HTTP ${status}`, { cause: err })
        : new ChannelError('CHANNEL_REQUEST_FAILED', `Slack ${what}: HTTP ${status}`, { cause: err });
    }
    default:
      return new ChannelError('CHANNEL_NETWORK', `Slack ${what}: ${networkCause(err) ?? e.message ?? String(err)}`, { cause: err });
  }
}

/**
 * Slack answered (a Web API error such as `channel_not_found`, or a rate limit): a definite
 * reply that another way of sending the same text would meet too. An HTTP error status, a
 * body that is not the Web API's or a dropped connection is not one.
 */
export function isSlackAnswer(err: unknown): boolean {
  const code = (err as { code?: string } | undefined)?.code;
  return code === ErrorCode.PlatformError || code === ErrorCode.RateLimitedError;
}

/**
 * Slack errors that say this workspace or API does not take a stream's `chunks`: `invalid_chunks`
 * (the stream methods' reference: the chunks are not valid), `invalid_arguments` (an API whose
 * schema does not know the argument) and `no_text` (one that still requires `markdown_text`,
 * as the older `chat.appendStream` reference did).
 */
const CHUNK_REFUSALS: ReadonlySet<string> = new Set(['invalid_chunks', 'invalid_arguments', 'no_text']);

/** The Slack error string of a Web API call's rejection (before classification) when it refuses chunks; undefined otherwise. */
export function chunksRefusal(err: unknown): string | undefined {
  const code = (err as { data?: { error?: string } } | undefined)?.data?.error;
  return code !== undefined && CHUNK_REFUSALS.has(code) ? code : undefined;
}
