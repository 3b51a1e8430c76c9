import { z } from 'zod';
import type { ChannelConfigOf } from '../../src/contracts/channel.js';
import { secretRef } from '../../src/contracts/secret-ref.js';

/** `[[channels]] type = "telegram"`: its own keys, besides the ones every channel has. */
export const telegramConfig = z.strictObject({
  ...secretRef('token'),
  mode: z.enum(['polling', 'webhook']).default('polling'),
  api_root: z.url().default('https://api.telegram.org'),
  native_drafts: z.boolean().default(true),
  rich_messages: z.boolean().default(true),
  public_url: z.url().optional(),
  ...secretRef('webhook_secret'),
});

export type TelegramConfig = ChannelConfigOf<typeof telegramConfig>;
