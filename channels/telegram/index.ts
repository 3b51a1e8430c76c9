import { defineChannel } from '../../src/contracts/channel.js';
import { telegramConfig } from './config.js';

/** Telegram bots (grammy): long polling or a webhook. */
export const telegram = defineChannel({
  kind: 'telegram',
  summary: 'a Telegram bot, by long polling or webhook',
  config: telegramConfig,
  secrets: {
    names: ['token', 'webhook_secret'],
    needs: (c) => (c.mode === 'webhook' ? { required: ['token', 'webhook_secret'], optional: [] } : { required: ['token'], optional: ['webhook_secret'] }),
    shapes: { token: { pattern: /^\d+:[A-Za-z0-9_-]{30,}$/, expected: 'a BotFather token, "<bot id>:<35 characters>" like 123456789:AAH…' } },
  },
  // getUpdates answers 409 to a second poller; a webhook is posted to whichever instance the balancer picks.
  exclusiveListener: (c) => c.mode === 'polling',
  problems: (c) =>
    c.mode === 'webhook' && !c.public_url ? [{ path: ['mode'], message: 'webhook mode needs public_url (the https address Telegram should post to)' }] : [],
  load: async () => (await import('./factory.js')).createChannel,
});
