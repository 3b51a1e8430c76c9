import type { ChannelFactory } from '../../src/contracts/channel.js';
import type { WebchatConfig } from './config.js';
import { WebchatAdapter } from './adapter.js';

/** The local web chat channel. The first one to start also serves `/` and `/chat`. */
export const createChannel: ChannelFactory<WebchatConfig> = (config, ctx) => {
  const token = ctx.secret('access_token');
  return new WebchatAdapter({
    id: config.id,
    http: ctx.http,
    log: ctx.log,
    stateDir: ctx.stateDir,
    maxAttachmentBytes: ctx.maxAttachmentBytes,
    ...(token ? { accessToken: token } : {}),
    backlogMaxTabs: config.backlog_max_tabs,
    backlogMaxBytes: config.backlog_max_bytes,
    uploadQuotaBytes: config.upload_quota_bytes,
    onEvict: (n) => ctx.evicted?.('webchat_backlog', n),
    ...(ctx.storage ? { storage: ctx.storage } : {}),
  });
};
