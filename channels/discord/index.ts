import { defineChannel } from '../../src/contracts/channel.js';
import { discordConfig } from './config.js';

/** Discord bots (discord.js): the gateway in, REST out. */
export const discord = defineChannel({
  kind: 'discord',
  summary: 'a Discord bot on the gateway',
  config: discordConfig,
  secrets: { names: ['token'], needs: () => ({ required: ['token'], optional: [] }) },
  // One gateway session per bot: a second one would receive every message again.
  exclusiveListener: () => true,
  // Each gateway shard is a listener of its own: in cluster mode leased separately.
  listenerParts: (config) => config.shards,
  load: async () => (await import('./factory.js')).createChannel,
});
