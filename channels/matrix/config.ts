import { z } from 'zod';
import type { ChannelConfigOf } from '../../src/contracts/channel.js';
import { secretRef } from '../../src/contracts/secret-ref.js';

/** A Matrix user id, `@localpart:server`. */
const mxid = z.string().regex(/^@[^:\s]+:[^\s]+$/, 'write a Matrix user id, e.g. "@bot:example.org"');

/** `[[channels]] type = "matrix"`: its own keys, besides the ones every channel has (allow_from, require_mention). */
export const matrixConfig = z.strictObject({
  /** The client-server API base, e.g. "https://matrix.example.org" (no /_matrix path). */
  homeserver_url: z.url(),
  /** The bot's account; the access token must belong to it. */
  user_id: mxid,
  ...secretRef('access_token'),
  /** Rooms (ids "!abc:server") the bot answers in; empty: direct chats only. */
  rooms: z.array(z.string().regex(/^![^:\s]+:[^\s]+$/, 'write a room id, e.g. "!abcdef:example.org"')).default([]),
  /** Join rooms the bot is invited to by a sender allow_from lets in (direct chats, or a room in `rooms`). */
  auto_join: z.boolean().default(false),
});

export type MatrixConfig = ChannelConfigOf<typeof matrixConfig>;
