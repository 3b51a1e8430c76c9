import type { ChannelFactory } from '../../src/contracts/channel.js';
import type { SlackConfig } from './config.js';
import { ChannelError } from '../../src/contracts/errors.js';
import { SlackAdapter } from './adapter.js';

/** The Slack channel (@slack/bolt): Socket Mode or HTTP events. */
export const createChannel: ChannelFactory<SlackConfig> = (config, ctx) => {
  const botToken = ctx.secret('bot_token');
  const appToken = ctx.secret('app_token');
  const signingSecret = ctx.secret('signing_secret');
  if (!botToken) throw new ChannelError('CHANNEL_AUTH_FAILED', `channel "${config.id}" has no bot token`, { retryable: false });
  return new SlackAdapter(
    {
      id: config.id,
      mode: config.mode,
      apiUrl: config.api_url.endsWith('/') ? config.api_url : `${config.api_url}/`,
      replyInThread: config.reply_in_thread,
      nativeStream: config.native_stream,
      http: ctx.http,
      log: ctx.log,
    },
    { botToken, ...(appToken ? { appToken } : {}), ...(signingSecret ? { signingSecret } : {}) },
  );
};
