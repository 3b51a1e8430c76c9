import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { Deliver } from '../../src/contracts/channel.js';
import { BODY_TIMEOUT_MS, readBody, secretEquals } from '../../src/util/http-helpers.js';
import { OUTSIDE_WINDOW_CODE } from './errors.js';
import { failedStatusesOf, messagesOf, normalizeMessage, type WaIdentity, type WaWebhook } from './normalize.js';

/** Meta's webhook bodies are a few KB; a batch of them stays far below this. */
const MAX_BODY_BYTES = 1024 * 1024;
/** The form of X-Hub-Signature-256: `sha256=` and a hex HMAC-SHA256. */
const SIGNATURE_FORM = /^sha256=[0-9a-f]{64}$/i;

/** Whether `header` (`sha256=<hex>`) is the HMAC-SHA256 of `raw` with the app secret; constant time. */
export function signatureValid(raw: Buffer, header: string | string[] | undefined, appSecret: string): boolean {
  if (typeof header !== 'string' || !header.startsWith('sha256=')) return false;
  const given = Buffer.from(header.slice('sha256='.length), 'hex');
  const expected = createHmac('sha256', appSecret).update(raw).digest();
  return given.length === expected.length && timingSafeEqual(given, expected);
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
 * is 401 and nothing is stored. A body not all in within BODY_TIMEOUT_MS is 408. The 200 goes out
 * once every message of the batch is in the inbox; a failure answers 503, so Meta delivers
 * the batch again and the inbox drops what it already has (the wamid is the key).
 */
export function notifyHandler(o: WebhookOptions) {
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const refuse = () => {
      o.log.warn({ channel: o.channelId }, 'WhatsApp webhook refused: wrong or missing X-Hub-Signature-256');
      // No keep-alive for a refused client: an unread body would hold the socket.
      res.writeHead(401, { 'content-type': 'text/plain', connection: 'close' }).end('invalid signature\n');
    };
    const signature = req.headers['x-hub-signature-256'];
    // A header that cannot pass is refused before the body (up to 1 MiB) is read.
    if (typeof signature !== 'string' || !SIGNATURE_FORM.test(signature)) {
      req.resume();
      return refuse();
    }
    const raw = await readBody(req, MAX_BODY_BYTES, BODY_TIMEOUT_MS);
    if (raw === 'too_large') return void res.writeHead(413).end();
    if (raw === 'timeout') return void res.writeHead(408, { connection: 'close' }).end();
    if (!signatureValid(raw, signature, o.appSecret)) return refuse();
    let body: WaWebhook;
    try {
      body = JSON.parse(raw.toString('utf8')) as WaWebhook;
    } catch {
      return void res.writeHead(400).end();
    }
    const me = o.me();
    // A send can be accepted and fail later (the 24-hour window is often reported this way):
    // it is logged with WhatsApp's reason; there is nothing to retry.
    for (const st of failedStatusesOf(body, me)) {
      const e = st.errors?.[0];
      o.log.warn(
        {
          channel: o.channelId,
          wamid: st.id,
          to: st.recipient_id,
          code: e?.code === OUTSIDE_WINDOW_CODE ? 'CHANNEL_WINDOW_CLOSED' : 'CHANNEL_REQUEST_FAILED',
          whatsappError: e?.code,
          reason: e?.error_data?.details ?? e?.message ?? e?.title,
        },
        'WhatsApp could not deliver a message it had accepted',
      );
    }
    const messages = messagesOf(body, me);
    try {
      await Promise.all(
        messages.map(({ message, name }) => {
          const msg = normalizeMessage(message, name, o.channelId, me);
          if (msg) return o.deliver(msg);
          o.log.debug({ channel: o.channelId, type: message.type }, 'WhatsApp message without text or a file; nothing to answer');
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
