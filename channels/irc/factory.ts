import type { ChannelFactory } from '../../src/contracts/channel.js';
import type { IrcConfig } from './config.js';
import { IrcAdapter } from './adapter.js';

/** The IRC channel. `allow_from` is read here as well: IRC senders are matched by mask (nick!user@host). */
export const createChannel: ChannelFactory<IrcConfig> = (config, ctx) => {
  const common = config as IrcConfig & { allow_from?: string[]; connect_timeout_ms?: number };
  const [host, port] = splitServer(config.server);
  return new IrcAdapter({
    id: config.id,
    host,
    port,
    tls: config.tls,
    nick: config.nick,
    password: ctx.secret('password'),
    channels: config.channels,
    allowFrom: common.allow_from ?? ['*'],
    floodBurst: config.flood_burst,
    floodIntervalMs: config.flood_interval_ms,
    connectTimeoutMs: common.connect_timeout_ms ?? 30_000,
    log: ctx.log,
  });
};

function splitServer(server: string): [string, number] {
  const at = server.lastIndexOf(':');
  return [server.slice(0, at).replace(/^\[|\]$/g, ''), Number(server.slice(at + 1))];
}
