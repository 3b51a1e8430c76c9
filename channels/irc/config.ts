import { z } from 'zod';
import type { ChannelConfigOf } from '../../src/contracts/channel.js';
import { secretRef } from '../../src/contracts/secret-ref.js';

/** An IRC nickname (RFC 2812 letters, digits and specials, not starting with a digit or "-"). */
const nick = z
  .string()
  .regex(/^[A-Za-z[\]\\`_^{|}][A-Za-z0-9[\]\\`_^{|}-]{0,29}$/, 'write an IRC nickname: letters, digits and [ ] \\ ` _ ^ { | } -, at most 30');

/** `[[channels]] type = "irc"`: its own keys, besides the ones every channel has. */
export const ircConfig = z.strictObject({
  /** The server as `host:port`, e.g. "irc.libera.chat:6697". */
  server: z.string().regex(/^[A-Za-z0-9.-]+:\d{1,5}$|^\[[0-9A-Fa-f:.]+\]:\d{1,5}$/, 'write host:port, e.g. "irc.libera.chat:6697"'),
  /** TLS on the connection (port 6697 by convention); off only for a server on this machine. */
  tls: z.boolean().default(true),
  nick,
  /** The account's password: SASL PLAIN (account = nick) where the server offers it, the server password (PASS) otherwise. */
  ...secretRef('password'),
  /** Channels to join, e.g. ["#channeld"]. */
  // RFC 2812: no space, comma or BEL (^G) in a channel name.
  // biome-ignore lint/suspicious/noControlCharactersInRegex: BEL is named to be refused
  channels: z.array(z.string().regex(/^[#&+!][^\s,\x07]{1,49}$/, 'write a channel name such as "#channeld"')).default([]),
  /** How many lines may go at once before pacing starts (the token bucket's size). */
  flood_burst: z.number().int().min(1).max(100).default(4),
  /** One more line may go every this many ms once the burst is spent (the bucket's refill). */
  flood_interval_ms: z.number().int().min(0).max(60_000).default(2000),
});

export type IrcConfig = ChannelConfigOf<typeof ircConfig>;
