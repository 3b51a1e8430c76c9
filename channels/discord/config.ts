import { z } from 'zod';
import type { ChannelConfigOf } from '../../src/contracts/channel.js';
import { secretRef } from '../../src/contracts/secret-ref.js';

/** `[[channels]] type = "discord"`: its own keys, besides the ones every channel has. */
export const discordConfig = z.strictObject({
  ...secretRef('token'),
  rest_api: z.url().default('https://discord.com/api'),
  guilds: z.array(z.string().min(1)).default([]),
});

export type DiscordConfig = ChannelConfigOf<typeof discordConfig>;
