import { join } from 'node:path';
import type { ChannelFactory } from '../../src/contracts/channel.js';
import { ChannelError } from '../../src/contracts/errors.js';
import { MattermostAdapter } from './adapter.js';
import type { MattermostConfig } from './config.js';

/** The Mattermost channel (REST with fetch, the WebSocket with `ws`). */
export const createChannel: ChannelFactory<MattermostConfig> = (config, ctx) => {
  const token = ctx.secret('token');
  if (!token) throw new ChannelError('CHANNEL_AUTH_FAILED', `channel "${config.id}" has no token`, { retryable: false });
  return new MattermostAdapter({
    id: config.id,
    url: config.url.replace(/\/+$/, ''),
    token,
    teams: config.teams,
    channels: config.channels,
    log: ctx.log,
    cursorFile: join(ctx.stateDir, 'mattermost', `${config.id}.cursor`),
    ...(ctx.duplicateWindowMs ? { duplicateWindowMs: ctx.duplicateWindowMs } : {}),
    listenerMoves: ctx.listenerMoves === true,
  });
};
