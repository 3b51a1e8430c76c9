import { ChannelError } from '../../src/contracts/errors.js';

/**
 * SASL failures that say nothing against the credentials (RFC 6120 §6.5): the server could
 * not check them just now (`temporary-auth-failure`, §6.5.12, "try again later"), or the
 * exchange was cut short (`aborted`, §6.5.1). A login refused for either is tried again.
 */
const TEMPORARY_SASL: ReadonlySet<string> = new Set(['temporary-auth-failure', 'aborted']);

/**
 * @xmpp/client's failures: a SASL refusal (SASLError with its condition), a stream error
 * (XMPPError with its condition), or a socket error. Refused credentials and a conflict
 * with another session are not retried; the rest is, a temporary SASL failure included.
 */
export function classifyXmppError(err: unknown, what = 'request'): ChannelError {
  if (err instanceof ChannelError) return err;
  const e = err as { name?: string; condition?: string; message?: string; code?: string } | undefined;
  const detail = `XMPP ${what}: ${e?.message ?? String(err)}`;
  if (e?.name === 'SASLError') {
    if (e.condition !== undefined && TEMPORARY_SASL.has(e.condition))
      return new ChannelError('CHANNEL_UNAVAILABLE', `${detail}: the server could not log in the bot just now; trying again`, { cause: err });
    if (e.condition === 'not-authorized' || e.condition === 'account-disabled' || e.condition === 'credentials-expired' || e.condition === 'invalid-authzid')
      return new ChannelError(
        'CHANNEL_AUTH_FAILED',
        `${detail}: the server refused the jid or password; check jid and password_env/password_file/password_credential`,
        {
          cause: err,
        },
      );
    return new ChannelError('CHANNEL_AUTH_FAILED', `${detail}: authentication failed`, { cause: err });
  }
  if (e?.name === 'StreamError' || e?.name === 'XMPPError') {
    if (e.condition === 'conflict')
      return new ChannelError('CHANNEL_CONFLICT', `${detail}: another session replaced this one`, { cause: err, retryable: true });
    if (e.condition === 'not-authorized' || e.condition === 'policy-violation') return new ChannelError('CHANNEL_FORBIDDEN', detail, { cause: err });
    if (e.condition === 'system-shutdown' || e.condition === 'internal-server-error') return new ChannelError('CHANNEL_UNAVAILABLE', detail, { cause: err });
  }
  if (e?.name === 'TimeoutError') return new ChannelError('CHANNEL_REQUEST_TIMEOUT', detail, { cause: err });
  return new ChannelError('CHANNEL_NETWORK', detail, { cause: err });
}
