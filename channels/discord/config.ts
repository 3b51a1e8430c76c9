import { z } from 'zod';
import type { ChannelConfigOf } from '../../src/contracts/channel.js';
import { secretRef } from '../../src/contracts/secret-ref.js';

/** `[[channels]] type = "discord"`: its own keys, besides the ones every channel has. */
export const discordConfig = z.strictObject({
  ...secretRef('token'),
  rest_api: z.url().default('https://discord.com/api'),
  guilds: z.array(z.string().min(1)).default([]),
  /**
   * How many gateway shards the bot's events are split into (Discord requires sharding past
   * 2,500 guilds; `GET /gateway/bot` recommends a count). One node runs them all; in cluster
   * mode each shard is leased on its own, so the shards spread over the instances.
   */
  shards: z.number().int().min(1).max(4096).default(1),
});

export type DiscordConfig = ChannelConfigOf<typeof discordConfig>;
