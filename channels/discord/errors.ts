import { DiscordAPIError, GatewayCloseCodes, HTTPError, RateLimitError } from 'discord.js';
import { ChannelError } from '../../src/contracts/errors.js';
import { networkCause } from '../../src/util/network-cause.js';

/** Gateway close codes after which discord.js will not reconnect: one exhaustive decision each. */
export function classifyClose(code: number): ChannelError {
  switch (code) {
    case GatewayCloseCodes.AuthenticationFailed:
      return new ChannelError(
        'CHANNEL_AUTH_FAILED',
        `Discord closed the gateway with ${code}: the bot token is wrong or was reset; set a new one in token_env/token_file/token_credential`,
      );
    case GatewayCloseCodes.DisallowedIntents:
      return new ChannelError(
        'CHANNEL_FORBIDDEN',
        `Discord closed the gateway with ${code} (disallowed intents): enable "Message Content Intent" under Bot → Privileged Gateway Intents in the Developer Portal`,
      );
    case GatewayCloseCodes.InvalidIntents:
      return new ChannelError('CHANNEL_FORBIDDEN', `Discord closed the gateway with ${code}: the intents sent are invalid`);
    case GatewayCloseCodes.InvalidShard:
      return new ChannelError('CHANNEL_FORBIDDEN', `Discord closed the gateway with ${code} (invalid shard): check the channel's \`shards\``);
    case GatewayCloseCodes.ShardingRequired:
      return new ChannelError(
        'CHANNEL_FORBIDDEN',
        `Discord closed the gateway with ${code}: this bot needs more gateway shards; raise the channel's \`shards\` (GET /gateway/bot recommends a count)`,
      );
    case GatewayCloseCodes.InvalidAPIVersion:
      return new ChannelError('CHANNEL_FORBIDDEN', `Discord closed the gateway with ${code}: the API version is no longer supported; update channeld`);
    default:
      return new ChannelError('CHANNEL_NETWORK', `Discord closed the gateway with ${code}`);
  }
}

/** REST failures: 429 carries its retry-after; auth and permissions are not retried. */
export function classifyDiscordError(err: unknown, what = 'request'): ChannelError {
  if (err instanceof ChannelError) return err;
  if (err instanceof RateLimitError)
    return new ChannelError('CHANNEL_RATE_LIMITED', `Discord ${what}: rate limited on ${err.route}`, { cause: err, retryAfterMs: err.retryAfter });
  if (err instanceof DiscordAPIError) {
    const detail = `Discord ${what}: ${err.status} ${err.message}`;
    if (err.status === 401) return new ChannelError('CHANNEL_AUTH_FAILED', `${detail}: the bot token was refused`, { cause: err });
    if (err.status === 403) return new ChannelError('CHANNEL_FORBIDDEN', `${detail}: the bot lacks a permission in this channel`, { cause: err });
    if (err.status >= 500) return new ChannelError('CHANNEL_UNAVAILABLE', detail, { cause: err });
    return new ChannelError('CHANNEL_REQUEST_FAILED', detail, { cause: err });
  }
  if (err instanceof HTTPError)
    return new ChannelError(err.status >= 500 ? 'CHANNEL_UNAVAILABLE' : 'CHANNEL_REQUEST_FAILED', `Discord ${what}: HTTP ${err.status}`, {
      cause: err,
      retryable: err.status >= 500,
    });
  const code = (err as { code?: string } | undefined)?.code;
  if (code === 'TokenInvalid')
    return new ChannelError('CHANNEL_AUTH_FAILED', 'Discord refused the bot token (401 on /gateway/bot); set a valid token', { cause: err });
  return new ChannelError('CHANNEL_NETWORK', `Discord ${what}: ${networkCause(err) ?? (err instanceof Error ? err.message : String(err))}`, { cause: err });
}

/**
 * The server does not take `enforce_nonce` (a Discord-compatible server without it): a 400
 * that names the field in its form errors, or a 400 that is not Discord's JSON at all (a
 * 400 created nothing, so sending again cannot duplicate). A Discord 400 about something
 * else is not; a 5xx says nothing about the field by itself (the adapter counts a run).
 */
export function isEnforceNonceRefused(err: unknown): boolean {
  if (!(err instanceof DiscordAPIError) || err.status !== 400) return false;
  // discord.js keeps a body that is not JSON as its bytes.
  const raw = err.rawError as unknown;
  if (raw instanceof ArrayBuffer) return true;
  return typeof raw !== 'object' || raw === null || !('code' in raw) || JSON.stringify(raw).includes('enforce_nonce');
}

/** No Discord answer but a server error (5xx, after discord.js's own retries). */
export function isServerFailure(err: unknown): boolean {
  return err instanceof HTTPError && err.status >= 500;
}
