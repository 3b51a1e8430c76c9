import type { ChannelFactory } from '../../src/dispatch/adapter.js';
import { WebchatAdapter } from './adapter.js';

/** The local web chat channel. The first one to start also serves `/` and `/chat`. */
export const createChannel: ChannelFactory = (config, ctx) => {
  if (config.type !== 'webchat') throw new TypeError(`webchat factory got a ${config.type} channel`);
  const token = ctx.secret('access_token');
  return new WebchatAdapter({
    id: config.id,
    http: ctx.http,
    log: ctx.log,
    ...(token ? { accessToken: token } : {}),
    backlogMaxTabs: config.backlog_max_tabs,
    backlogMaxBytes: config.backlog_max_bytes,
    onEvict: (n) => ctx.evicted?.('webchat_backlog', n),
  });
};
