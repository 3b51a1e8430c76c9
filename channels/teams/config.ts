import { z } from 'zod';
import type { ChannelConfigOf } from '../../src/contracts/channel.js';
import { secretRef } from '../../src/contracts/secret-ref.js';

/** `[[channels]] type = "teams"`: its own keys, besides the ones every channel has (allow_from, require_mention). */
export const teamsConfig = z.strictObject({
  /** The bot's Microsoft App ID (Azure Bot → Configuration): the audience every incoming token must carry. */
  app_id: z.string().regex(/^[0-9a-fA-F-]{36}$/, 'write the Microsoft App ID, a GUID like "00000000-0000-0000-0000-000000000000"'),
  /** The app's client secret. */
  ...secretRef('app_password'),
  /** A single-tenant app's directory (tenant) id: tokens come from that tenant, and only its conversations are served. */
  tenant_id: z
    .string()
    .regex(/^[0-9a-fA-F-]{36}$/, 'write the tenant id, a GUID')
    .optional(),
  /** Where the Bot Connector's signing keys are described; for tests and sovereign clouds. */
  openid_metadata_url: z.url().default('https://login.botframework.com/v1/.well-known/openidconfiguration'),
  /** Where the bot gets its own tokens (client credentials); default from tenant_id. */
  token_url: z.url().optional(),
});

export type TeamsConfig = ChannelConfigOf<typeof teamsConfig>;
