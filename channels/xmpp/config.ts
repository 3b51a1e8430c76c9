import { z } from 'zod';
import type { ChannelConfigOf } from '../../src/contracts/channel.js';
import { secretRef } from '../../src/contracts/secret-ref.js';

/** A bare JID: `local@domain`. */
const bareJid = /^[^@/\s"&'<>:]+@[A-Za-z0-9.-]+$/;

/** `[[channels]] type = "xmpp"`: its own keys, besides the ones every channel has. */
export const xmppConfig = z.strictObject({
  /** The bot's account, a bare JID, e.g. "channeld@example.org". */
  jid: z.string().regex(bareJid, 'write a bare JID, e.g. "channeld@example.org"'),
  ...secretRef('password'),
  /** Where to connect, `host:port`; unset: the jid's domain on port 5222. */
  server: z
    .string()
    .regex(/^[A-Za-z0-9.-]+:\d{1,5}$/, 'write host:port, e.g. "xmpp.example.org:5222"')
    .optional(),
  /** Group chats (XEP-0045) to join, each as `room@service/nick` (the nick defaults to the jid's local part). */
  rooms: z.array(z.string().regex(/^[^@/\s]+@[A-Za-z0-9.-]+(\/\S{1,64})?$/, 'write room@conference.example.org/nick')).default([]),
});

export type XmppConfig = ChannelConfigOf<typeof xmppConfig>;
