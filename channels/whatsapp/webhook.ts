import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { Deliver } from '../../src/contracts/channel.js';
import { BODY_TIMEOUT_MS, readBody, refuseAndClose, secretEquals } from '../../src/util/http-helpers.js';
import { OUTSIDE_WINDOW_CODE } from './errors.js';
import {
  failedStatusesOf,
  foreignNumbersOf,
  messagesOf,
  normalizeMessage,
  notificationErrorsOf,
  senderIdOf,
  type WaError,
  type WaIdentity,
  type WaMessage,
  type WaWebhook,
} from './normalize.js';

/** Meta's webhook bodies are a few KB; a batch of them stays far below this. */
const MAX_BODY_BYTES = 1024 * 1024;
/** The form of X-Hub-Signature-256: `sha256=` and a hex HMAC-SHA256. */
const SIGNATURE_FORM = /^sha256=[0-9a-f]{64}$/i;
/** Another number's notifications are warned about once per number in this time, not once each. */
const FOREIGN_NUMBER_WARN_INTERVAL_MS = 60 * 60_000;
/** Other numbers remembered for that; a Meta app has a handful, so this is only a ceiling. */
const MAX_FOREIGN_NUMBERS = 100;

/** Types channeld reads; one of them left without content (an empty text) has nothing to answer. */
const READ_TYPES = new Set(['text', 'interactive', 'button', 'image', 'audio', 'voice', 'document', 'video', 'sticker', 'location', 'contacts']);
/** Types that are no one's words: a reaction to a message, a user opening the chat. */
const QUIET_TYPES = new Set(['reaction', 'request_welcome']);
/** WhatsApp's errors as log fields, the first few of a list (the body is WhatsApp's, its size bounded only by the 1 MiB). */
const MAX_LOGGED_ERRORS = 5;

const errorsField = (errors: WaError[] | undefined) =>
  (Array.isArray(errors) ? errors : [])
    .slice(0, MAX_LOGGED_ERRORS)
    .map((e) => ({ code: e?.code, title: e?.title, details: e?.error_data?.details ?? e?.message }));

/**
 * Says why a message of the notification is not delivered. No sender id (neither `from` nor
 * `from_user_id`): nobody to answer, a warning. A system message (the user's number or BSUID
 * changed) is WhatsApp's, not the user's: an info line, since a chat named by the old id goes
 * on under the new one as a new conversation. A type channeld cannot read (`unsupported`, a
 * newer one) is a warning with the type and WhatsApp's errors; the sender is not told, since
 * Meta documents no answer to such a message. Reactions and empty texts: debug.
 */
function explainDropped(m: WaMessage, o: Pick<WebhookOptions, 'channelId' | 'log'>): void {
  const at = { channel: o.channelId, wamid: m.id, type: m.type };
  if (m.type === 'system') {
    const s = m.system ?? {};
    o.log.info(
      { ...at, systemType: s.type, previousUserId: s.previous_user_id, userId: s.user_id ?? m.from_user_id, newPhone: s.wa_id },
      'WhatsApp says a user changed their number or business-scoped user id; a chat named by the old one goes on as a new conversation',
    );
  } else if (!senderIdOf(m)) {
    o.log.warn(at, 'WhatsApp message names no sender (neither from nor from_user_id): acknowledged and dropped, there is no one to answer');
  } else if (READ_TYPES.has(m.type) || QUIET_TYPES.has(m.type)) {
    o.log.debug(at, 'WhatsApp message without text or a file; nothing to answer');
  } else {
    o.log.warn(
      { ...at, ...(m.unsupported?.type ? { unsupportedType: m.unsupported.type } : {}), whatsappErrors: errorsField(m.errors) },
      `WhatsApp message of type "${m.type}" has nothing channeld can read (no text, file, location or contacts): dropped, the sender is not told`,
    );
  }
}

/** Whether `header` (`sha256=<hex>`) is the HMAC-SHA256 of `raw` with the app secret; constant time. */
export function signatureValid(raw: Buffer, header: string | string[] | undefined, appSecret: string): boolean {
  if (typeof header !== 'string' || !header.startsWith('sha256=')) return false;
  const given = Buffer.from(header.slice('sha256='.length), 'hex');
  const expected = createHmac('sha256', appSecret).update(raw).digest();
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/**
 * Warns about notifications for other phone numbers of the app (one callback URL serves them
 * all): they are answered 200, or Meta would retry them for days, so without the warning
 * that number's messages vanish. Once per number per FOREIGN_NUMBER_WARN_INTERVAL_MS, with
 * the count skipped since: bounded log volume, however busy the other number is.
 */
function foreignNumberWarner(o: Pick<WebhookOptions, 'channelId' | 'log'>): (body: WaWebhook, me: WaIdentity) => void {
  const seen = new Map<string, { warnedAtMs: number; skippedMessages: number }>();
  return (body, me) => {
    for (const f of foreignNumbersOf(body, me)) {
      const nowMs = performance.now();
      const s = seen.get(f.phoneNumberId);
      if (s && nowMs - s.warnedAtMs < FOREIGN_NUMBER_WARN_INTERVAL_MS) {
        s.skippedMessages += f.messages;
        continue;
      }
      seen.delete(f.phoneNumberId);
      if (seen.size >= MAX_FOREIGN_NUMBERS) seen.delete(seen.keys().next().value!);
      seen.set(f.phoneNumberId, { warnedAtMs: nowMs, skippedMessages: 0 });
      o.log.warn(
        {
          channel: o.channelId,
          phoneNumberId: f.phoneNumberId,
          messages: f.messages,
          statuses: f.statuses,
          ...(s ? { skippedMessagesSinceLastWarning: s.skippedMessages } : {}),
        },
        `WhatsApp webhook for phone_number_id ${f.phoneNumberId}, not this channel's (${me.phoneNumberId}): answered 200 and dropped. ` +
          `To answer that number, configure a channel with phone_number_id = "${f.phoneNumberId}" and give the number a webhook override ` +
          `(an alternate callback URL) to that channel's /webhooks/<id>; to serve it elsewhere, point its override there`,
      );
    }
  };
}

export interface WebhookOptions {
  channelId: string;
  appSecret: string;
  verifyToken: string;
  me: () => WaIdentity;
  deliver: Deliver;
  log: Logger;
}

/**
 * The subscription check (`GET`): Meta sends `hub.mode=subscribe`, our verify token and a
 * challenge to echo. Anything else, including the wrong token, is 403.
 */
export function verifyHandler(o: Pick<WebhookOptions, 'verifyToken' | 'log' | 'channelId'>) {
  return (_req: IncomingMessage, res: ServerResponse, url: URL): void => {
    const token = url.searchParams.get('hub.verify_token');
    const challenge = url.searchParams.get('hub.challenge');
    if (url.searchParams.get('hub.mode') !== 'subscribe' || token === null || challenge === null || !secretEquals(token, o.verifyToken)) {
      o.log.warn({ channel: o.channelId }, 'WhatsApp webhook verification refused: wrong or missing hub.verify_token');
      res.writeHead(403, { 'content-type': 'text/plain' }).end('wrong verify token\n');
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' }).end(challenge);
  };
}

/**
 * Event notifications (`POST`). A missing or malformed X-Hub-Signature-256 is 401 before the
 * body is read; the HMAC is checked over the raw bytes before anything is parsed: a wrong one
 * is 401 and nothing is stored. A body over MAX_BODY_BYTES is 413, one not all in within
 * BODY_TIMEOUT_MS is 408; these refusals, and the 401s, close the connection. The 200 goes
 * out once every message of the batch is in the inbox; a failure answers 503, so Meta
 * delivers the batch again and the inbox drops what it already has (the wamid is the key).
 * Another number's changes are answered 200 too, with a warning (foreignNumberWarner).
 */
export function notifyHandler(o: WebhookOptions) {
  const warnForeign = foreignNumberWarner(o);
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const refuse = () => {
      o.log.warn({ channel: o.channelId }, 'WhatsApp webhook refused: wrong or missing X-Hub-Signature-256');
      refuseAndClose(res, 401, 'invalid signature\n');
    };
    const signature = req.headers['x-hub-signature-256'];
    // A header that cannot pass is refused before the body (up to 1 MiB) is read.
    if (typeof signature !== 'string' || !SIGNATURE_FORM.test(signature)) {
      req.resume();
      return refuse();
    }
    const raw = await readBody(req, MAX_BODY_BYTES, BODY_TIMEOUT_MS);
    if (raw === 'too_large') return refuseAndClose(res, 413, 'body too large\n');
    if (raw === 'timeout') return refuseAndClose(res, 408, 'body too slow\n');
    if (!signatureValid(raw, signature, o.appSecret)) return refuse();
    let body: WaWebhook;
    try {
      body = JSON.parse(raw.toString('utf8')) as WaWebhook;
    } catch {
      return void res.writeHead(400).end();
    }
    const me = o.me();
    warnForeign(body, me);
    // A send can be accepted and fail later (the 24-hour window is often reported this way):
    // it is logged with WhatsApp's reason; there is nothing to retry.
    for (const st of failedStatusesOf(body, me)) {
      const e = st.errors?.[0];
      o.log.warn(
        {
          channel: o.channelId,
          wamid: st.id,
          to: st.recipient_id ?? st.recipient_user_id,
          code: e?.code === OUTSIDE_WINDOW_CODE ? 'CHANNEL_WINDOW_CLOSED' : 'CHANNEL_REQUEST_FAILED',
          whatsappError: e?.code,
          reason: e?.error_data?.details ?? e?.message ?? e?.title,
        },
        'WhatsApp could not deliver a message it had accepted',
      );
    }
    const errors = notificationErrorsOf(body, me);
    if (errors.length) o.log.warn({ channel: o.channelId, whatsappErrors: errorsField(errors) }, 'WhatsApp reported errors in a webhook notification');
    const messages = messagesOf(body, me);
    try {
      await Promise.all(
        messages.map(({ message, name }) => {
          const msg = normalizeMessage(message, name, o.channelId, me);
          if (msg && message.errors?.length)
            o.log.warn({ channel: o.channelId, wamid: message.id, whatsappErrors: errorsField(message.errors) }, 'WhatsApp reported errors with a message');
          if (msg) return o.deliver(msg);
          explainDropped(message, o);
          return false;
        }),
      );
      res.writeHead(200).end();
    } catch (err) {
      o.log.warn({ err, channel: o.channelId }, 'WhatsApp webhook not stored; answering 503 so Meta delivers it again');
      if (!res.headersSent) res.writeHead(503).end();
    }
  };
}
