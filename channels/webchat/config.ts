import { z } from 'zod';
import type { ChannelConfigOf } from '../../src/contracts/channel.js';

/** `[[channels]] type = "webchat"`: its own keys, besides the ones every channel has. */
export const webchatConfig = z.strictObject({
  /** The variable holding the page's access token; anyone who reaches the page may chat when unset. */
  access_token_env: z.string().min(1).optional(),
  /** Tabs whose latest replies are kept for a reload (least recently used evicted first). */
  backlog_max_tabs: z.number().int().positive().default(200),
  /** Bytes of reply text all those backlogs may hold together. */
  backlog_max_bytes: z
    .number()
    .int()
    .positive()
    .default(8 * 1024 * 1024),
  /** Bytes all kept uploads may hold together (7 days); one tab may use a quarter of it. */
  upload_quota_bytes: z
    .number()
    .int()
    .positive()
    .default(256 * 1024 * 1024),
});

export type WebchatConfig = ChannelConfigOf<typeof webchatConfig>;
