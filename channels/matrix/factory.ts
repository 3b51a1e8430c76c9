import type { ChannelFactory } from '../../src/contracts/channel.js';
import { ChannelError } from '../../src/contracts/errors.js';
import { MatrixAdapter } from './adapter.js';
import type { MatrixConfig } from './config.js';

/** The Matrix channel (client-server API over fetch). */
export const createChannel: ChannelFactory<MatrixConfig> = (config, ctx) => {
  const token = ctx.secret('access_token');
  if (!token) throw new ChannelError('CHANNEL_AUTH_FAILED', `channel "${config.id}" has no access_token`, { retryable: false });
  // allow_from is a common key: auto_join reads it to decide whose invites to accept.
  const allowFrom = (config as { allow_from?: string[] }).allow_from ?? [];
  return new MatrixAdapter(
    {
      id: config.id,
      homeserverUrl: config.homeserver_url.replace(/\/+$/, ''),
      userId: config.user_id,
      rooms: config.rooms,
      autoJoin: config.auto_join,
      allowFrom,
      stateDir: ctx.stateDir,
      log: ctx.log,
      ...(ctx.duplicateWindowMs ? { duplicateWindowMs: ctx.duplicateWindowMs } : {}),
      listenerMoves: ctx.listenerMoves === true,
    },
    token,
  );
};
