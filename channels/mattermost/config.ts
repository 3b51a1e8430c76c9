import { z } from 'zod';
import type { ChannelConfigOf } from '../../src/contracts/channel.js';
import { secretRef } from '../../src/contracts/secret-ref.js';

/** `[[channels]] type = "mattermost"`: its own keys, besides the ones every channel has (`allow_from`, `require_mention`, ...). */
export const mattermostConfig = z.strictObject({
  /** The server's base URL, e.g. "https://chat.example.com" (REST under /api/v4, the WebSocket at /api/v4/websocket). */
  url: z.url({ protocol: /^https?$/, error: 'write the server address with http(s)://, e.g. "https://chat.example.com"' }),
  /** A bot account's access token (System Console → Integrations → Bot Accounts). */
  ...secretRef('token'),
  /** Only channels of these teams (ids or names); empty: every team the bot is in. Direct and group messages are not team-bound. */
  teams: z.array(z.string().min(1)).default([]),
  /** Only these channels (ids or names); empty: every channel the bot is in. Direct and group messages always reach it. */
  channels: z.array(z.string().min(1)).default([]),
});

export type MattermostConfig = ChannelConfigOf<typeof mattermostConfig>;
