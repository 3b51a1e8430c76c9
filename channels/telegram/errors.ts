import { GrammyError, HttpError } from 'grammy';
import { ChannelError } from '../../src/contracts/errors.js';
import { networkCause } from '../../src/util/network-cause.js';

/**
 * The one place Telegram failures are sorted. "Telegram answered no" (GrammyError, with
 * its error code and retry_after) is decided by code; "we never got an answer" (HttpError)
 * is a retryable network failure.
 */
export function classifyTelegramError(err: unknown, method = 'request'): ChannelError {
  if (err instanceof GrammyError) {
    const detail = `Telegram ${method}: ${err.error_code} ${err.description}`;
    switch (true) {
      case err.error_code === 401:
        return new ChannelError('CHANNEL_AUTH_FAILED', `${detail}: the bot token was refused; check token_env/token_file/token_credential`, { cause: err });
      case err.error_code === 409:
        return new ChannelError('CHANNEL_CONFLICT', `${detail}: another process is polling this bot or a webhook is set`, { cause: err });
      case err.error_code === 429:
        return new ChannelError('CHANNEL_RATE_LIMITED', detail, { cause: err, retryAfterMs: (err.parameters.retry_after ?? 1) * 1000 });
      case err.error_code === 403:
        return new ChannelError('CHANNEL_FORBIDDEN', `${detail}: the bot was blocked, kicked, or lacks a permission`, { cause: err });
      case err.error_code >= 500:
        return new ChannelError('CHANNEL_UNAVAILABLE', detail, { cause: err });
      default:
        return new ChannelError('CHANNEL_REQUEST_FAILED', detail, { cause: err });
    }
  }
  // grammy's "Network request for 'getMe' failed!" says neither where nor why: the cause does.
  if (err instanceof HttpError) return new ChannelError('CHANNEL_NETWORK', `Telegram ${method}: ${networkCause(err) ?? err.message}`, { cause: err });
  if (err instanceof ChannelError) return err;
  return new ChannelError('CHANNEL_NETWORK', `Telegram ${method}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
}

/** "message is not modified": the edit asked for what is already shown. */
export function isNotModified(err: unknown): boolean {
  return err instanceof GrammyError && err.error_code === 400 && /message is not modified/i.test(err.description);
}

/** Telegram could not parse the HTML entities we sent. */
export function isEntityError(err: unknown): boolean {
  return err instanceof GrammyError && err.error_code === 400 && /can't parse entities|unsupported start tag|can't find end tag/i.test(err.description);
}

/**
 * The server does not know rich messages (an older Bot API): the method is unknown, or an
 * edit without `text` reads as empty. Remembered per bot; the HTML path takes over.
 */
export function isRichUnsupported(err: unknown): boolean {
  if (!(err instanceof GrammyError)) return false;
  if (err.error_code === 404) return true;
  return err.error_code === 400 && /method not found|text (is|must be non-)empty|rich_message|unknown (parameter|field)/i.test(err.description);
}

/**
 * Telegram answered with a definite no about the chat, the bot or the message (a 4xx other
 * than a rich-message refusal): an HTML message would be refused the same way. Anything else
 * (a 5xx, a body that is not a Bot API answer, no answer at all) may be the server failing at
 * rich messages only, so the HTML path is tried for that message.
 */
export function isDefiniteRefusal(err: unknown): boolean {
  return err instanceof GrammyError && err.error_code >= 400 && err.error_code < 500;
}

/** Telegram refused this rich message's content (its parser or limits): this message goes the HTML way. */
export function isRichContentError(err: unknown): boolean {
  return err instanceof GrammyError && err.error_code === 400 && !isNotModified(err) && !/not found|can't be edited|MESSAGE_ID_INVALID/i.test(err.description);
}
