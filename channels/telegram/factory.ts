import type { ChannelFactory } from '../../src/contracts/channel.js';
import type { TelegramConfig } from './config.js';
import { ChannelError } from '../../src/contracts/errors.js';
import { TelegramAdapter } from './adapter.js';

/** The Telegram channel (grammy). */
export const createChannel: ChannelFactory<TelegramConfig> = (config, ctx) => {
  const token = ctx.secret('token');
  if (!token) throw new ChannelError('CHANNEL_AUTH_FAILED', `channel "${config.id}" has no token`, { retryable: false });
  const webhookSecret = ctx.secret('webhook_secret');
  return new TelegramAdapter(
    {
      id: config.id,
      apiRoot: config.api_root.replace(/\/+$/, ''),
      mode: config.mode,
      nativeDrafts: config.native_drafts,
      richMessages: config.rich_messages,
      ...(config.public_url ? { publicUrl: config.public_url } : {}),
      http: ctx.http,
      log: ctx.log,
    },
    token,
    webhookSecret,
  );
};
