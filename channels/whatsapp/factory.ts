import type { ChannelFactory } from '../../src/contracts/channel.js';
import { ChannelError } from '../../src/contracts/errors.js';
import { WhatsAppAdapter } from './adapter.js';
import type { WhatsAppConfig } from './config.js';

/** The WhatsApp Cloud API channel (raw HTTP: Meta keeps no maintained Node SDK for it). */
export const createChannel: ChannelFactory<WhatsAppConfig> = (config, ctx) => {
  const accessToken = ctx.secret('access_token');
  const appSecret = ctx.secret('app_secret');
  const verifyToken = ctx.secret('verify_token');
  if (!accessToken || !appSecret || !verifyToken)
    throw new ChannelError('CHANNEL_AUTH_FAILED', `channel "${config.id}" needs access_token, app_secret and verify_token`, { retryable: false });
  return new WhatsAppAdapter({
    id: config.id,
    phoneNumberId: config.phone_number_id,
    apiRoot: config.api_root.replace(/\/+$/, ''),
    accessToken,
    appSecret,
    verifyToken,
    http: ctx.http,
    log: ctx.log,
  });
};
