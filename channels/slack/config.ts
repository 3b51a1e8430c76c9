import { z } from 'zod';
import type { ChannelConfigOf } from '../../src/contracts/channel.js';
import { secretRef } from '../../src/contracts/secret-ref.js';

/** `[[channels]] type = "slack"`: its own keys, besides the ones every channel has. */
export const slackConfig = z.strictObject({
  ...secretRef('bot_token'),
  ...secretRef('app_token'),
  ...secretRef('signing_secret'),
  mode: z.enum(['socket', 'http']).default('socket'),
  api_url: z.url().default('https://slack.com/api/'),
  reply_in_thread: z.boolean().default(true),
  native_stream: z.boolean().default(true),
});

export type SlackConfig = ChannelConfigOf<typeof slackConfig>;
