import { defineChannel } from '../../src/contracts/channel.js';
import { discordConfig } from './config.js';

/** Discord bots (discord.js): the gateway in, REST out. */
export const discord = defineChannel({
  kind: 'discord',
  summary: 'a Discord bot on the gateway',
  config: discordConfig,
  secrets: {
    names: ['token'],
    needs: () => ({ required: ['token'], optional: [] }),
    shapes: {
      token: {
        pattern: /^[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{20,}$/,
        expected: 'a bot token from the Developer Portal, three dot-separated parts',
      },
    },
  },
  // One gateway session per bot: a second one would receive every message again.
  exclusiveListener: () => true,
  // Each gateway shard is a listener of its own: in cluster mode leased separately.
  listenerParts: (config) => config.shards,
  load: async () => (await import('./factory.js')).createChannel,
});
