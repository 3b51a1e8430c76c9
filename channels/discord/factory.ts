import { join } from 'node:path';
import type { ChannelFactory } from '../../src/contracts/channel.js';
import type { DiscordConfig } from './config.js';
import { ChannelError } from '../../src/contracts/errors.js';
import { DiscordAdapter } from './adapter.js';
import { SHARED_DM_CHANNELS } from './dm-channels.js';

/** The Discord channel (discord.js). */
export const createChannel: ChannelFactory<DiscordConfig> = (config, ctx) => {
  const token = ctx.secret('token');
  if (!token) throw new ChannelError('CHANNEL_AUTH_FAILED', `channel "${config.id}" has no token`, { retryable: false });
  return new DiscordAdapter(
    {
      id: config.id,
      restApi: config.rest_api.replace(/\/+$/, ''),
      guilds: config.guilds,
      shards: config.shards,
      log: ctx.log,
      cursorFile: join(ctx.stateDir, 'discord', `${config.id}.cursor`),
      ...(ctx.duplicateWindowMs ? { duplicateWindowMs: ctx.duplicateWindowMs } : {}),
      listenerMoves: ctx.listenerMoves === true,
      // Cluster mode: the instance that takes the listener over reads the DM channels the others saw.
      ...(ctx.sharedRecord ? { sharedDmChannels: ctx.sharedRecord(SHARED_DM_CHANNELS) } : {}),
    },
    token,
  );
};
