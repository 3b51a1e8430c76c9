import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Update } from 'grammy/types';
import type { Deliver } from '../../src/contracts/channel.js';
import { BODY_TIMEOUT_MS, readBody, refuseAndClose, secretEquals } from '../../src/util/http-helpers.js';
import type { Logger } from 'pino';
import { malformedUpdate, normalizeUpdate, type BotIdentity } from './normalize.js';

const MAX_BODY_BYTES = 1024 * 1024;

/**
 * Telegram's webhook POST. The secret header is checked in constant time before the body
 * is read; the answer is 200 only once the message is in the inbox, so Telegram retries
 * anything we could not store (the inbox drops the repeat).
 */
export function webhookHandler(o: { channelId: string; secret: string; bot: () => BotIdentity; deliver: Deliver; log: Logger }) {
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const given = req.headers['x-telegram-bot-api-secret-token'];
    if (typeof given !== 'string' || !secretEquals(given, o.secret)) {
      return refuseAndClose(res, 401, 'bad or missing secret token\n');
    }
    const body = await readBody(req, MAX_BODY_BYTES, BODY_TIMEOUT_MS);
    if (body === 'timeout') return refuseAndClose(res, 408, 'body too slow\n');
    if (body === 'too_large') return refuseAndClose(res, 413, 'body too large\n');
    let update: Update;
    try {
      update = JSON.parse(body.toString('utf8')) as Update;
    } catch {
      res.writeHead(400).end();
      return;
    }
    // Authenticated but unreadable: a refusal would make Telegram send it again forever.
    const bad = malformedUpdate(update);
    if (bad) {
      o.log.debug({ channel: o.channelId, reason: bad }, 'malformed Telegram update acknowledged and dropped');
      res.writeHead(200).end();
      return;
    }
    const msg = normalizeUpdate(update, o.channelId, o.bot());
    try {
      if (msg) await o.deliver(msg);
      res.writeHead(200).end();
    } catch (err) {
      o.log.warn({ err, channel: o.channelId }, 'webhook update not stored; Telegram will retry');
      res.writeHead(503).end();
    }
  };
}
