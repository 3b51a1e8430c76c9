import { ChannelError } from '../../src/contracts/errors.js';

/** The Graph API's error object (`{"error": {...}}`), as far as we read it. */
export interface GraphErrorBody {
  message?: string;
  type?: string;
  code?: number;
  error_subcode?: number;
  error_data?: { details?: string };
}

/** A Graph API answer that was not 2xx: its status, error object and Retry-After. */
export class GraphError extends Error {
  constructor(
    readonly status: number,
    readonly error: GraphErrorBody,
    readonly retryAfterMs: number | undefined,
  ) {
    super(
      `HTTP ${status}${error.code !== undefined ? ` (${error.code})` : ''}: ${error.message ?? 'no message'}${error.error_data?.details ? ` (${error.error_data.details})` : ''}`,
    );
    this.name = 'GraphError';
  }
}

/** Graph codes that mean "the token is no good": expired, revoked, for another app. */
const AUTH_CODES = new Set([190, 102, 463, 467]);
/** Graph and WhatsApp throttling codes (app, account, pair and throughput limits). */
const RATE_CODES = new Set([4, 17, 32, 613, 80007, 130429, 131056]);
/** Permission refusals: the token lacks whatsapp_business_messaging, or the number is not the app's. */
const FORBIDDEN_CODES = new Set([3, 10, 200, 131005, 131031]);
/** WhatsApp's "temporarily unavailable" family: worth another try. */
const UNAVAILABLE_CODES = new Set([1, 2, 131000, 131016, 131049, 133004]);
/** More than 24 hours since the user's last message: only a template may reach them. */
export const OUTSIDE_WINDOW_CODE = 131047;
/**
 * "Business-scoped User ID recipients are not supported for this message": a message type
 * only a phone number can receive (Meta names one-tap, zero-tap and copy-code authentication
 * templates), sent to a user known only by their BSUID. Another try cannot change that.
 */
export const BSUID_UNSUPPORTED_CODE = 131062;

/** The one place WhatsApp failures are sorted: the Graph error code first, then the HTTP status. */
export function classifyWhatsAppError(err: unknown, what = 'request'): ChannelError {
  if (err instanceof ChannelError) return err;
  if (err instanceof GraphError) {
    const detail = `WhatsApp ${what}: ${err.message}`;
    const code = err.error.code ?? -1;
    if (code === OUTSIDE_WINDOW_CODE)
      return new ChannelError('CHANNEL_WINDOW_CLOSED', `${detail}: the user last wrote more than 24 hours ago, so WhatsApp only takes a template message`, {
        cause: err,
      });
    if (code === BSUID_UNSUPPORTED_CODE)
      return new ChannelError(
        'CHANNEL_REQUEST_FAILED',
        `${detail}: WhatsApp does not deliver this kind of message to a business-scoped user id (the user's phone number is not known); it is not retried`,
        { cause: err },
      );
    if (err.status === 401 || AUTH_CODES.has(code))
      return new ChannelError('CHANNEL_AUTH_FAILED', `${detail}: the access token was refused; check access_token_env/access_token_file`, { cause: err });
    if (err.status === 429 || RATE_CODES.has(code))
      return new ChannelError('CHANNEL_RATE_LIMITED', detail, { cause: err, retryAfterMs: err.retryAfterMs ?? 1000 });
    if (FORBIDDEN_CODES.has(code) || err.status === 403)
      return new ChannelError('CHANNEL_FORBIDDEN', `${detail}: the token may not use this phone number (whatsapp_business_messaging, phone_number_id)`, {
        cause: err,
      });
    if (err.status >= 500 || UNAVAILABLE_CODES.has(code)) return new ChannelError('CHANNEL_UNAVAILABLE', detail, { cause: err });
    return new ChannelError('CHANNEL_REQUEST_FAILED', detail, { cause: err });
  }
  return new ChannelError('CHANNEL_NETWORK', `WhatsApp ${what}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
}
