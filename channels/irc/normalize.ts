import { randomUUID } from 'node:crypto';
import type { ChannelMessage } from '../../src/contracts/message.js';
import { ircLower, maskMatches, type Source } from './protocol.js';

/** Channel name prefixes (the ISUPPORT CHANTYPES every server we know offers). */
const CHANNEL_PREFIX = /^[#&+!]/;

/**
 * The sender's id is the `allow_from` entry that lets them in: the entry written exactly
 * (`nick!user@host`, case-insensitive) or else the first mask that matches. So `admins`
 * and approvers name the same strings the operator wrote in allow_from. Anyone else is
 * known by their full `nick!user@host`.
 */
export function senderId(from: Source, allowFrom: readonly string[]): string {
  const full = `${from.nick}!${from.user}@${from.host}`;
  const masks = allowFrom.filter((m) => m !== '*');
  return masks.find((m) => ircLower(m) === ircLower(full)) ?? masks.find((m) => maskMatches(m, full)) ?? full;
}

/**
 * Whether `allow_from` lets in the sender whose id `senderId` gave: `*`, or the entry their
 * id is (a sender no mask matches has their full mask as id, which no entry is). The core
 * decides the same way; the channel asks only where it must act before the core sees the message.
 */
export function senderAllowed(id: string, allowFrom: readonly string[]): boolean {
  return allowFrom.includes('*') || allowFrom.includes(id);
}

export interface PrivmsgInput {
  channelId: string;
  from: Source;
  target: string;
  text: string;
  selfNick: string;
  allowFrom: readonly string[];
}

/** A PRIVMSG as a ChannelMessage; undefined for our own lines, CTCP (ACTION, VERSION ...) and lines to someone else. */
export function normalizePrivmsg(p: PrivmsgInput): ChannelMessage | undefined {
  const me = ircLower(p.selfNick);
  if (ircLower(p.from.nick) === me || p.text.startsWith('\u0001')) return undefined;
  const inChannel = CHANNEL_PREFIX.test(p.target);
  if (!inChannel && ircLower(p.target) !== me) return undefined;
  const nick = p.selfNick.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  // "bot: hi", "bot, hi" and "@bot hi" address the bot; so does its nick anywhere as a word.
  const lead = new RegExp(`^@?${nick}[:,]?\\s+`, 'i');
  const anywhere = new RegExp(`(^|[^\\w\\[\\]\\\\\`^{|}-])@?${nick}($|[^\\w\\[\\]\\\\\`^{|}-])`, 'i');
  const addressed = !inChannel || anywhere.test(p.text);
  return {
    channelId: p.channelId,
    kind: 'irc',
    // IRC messages have no ids; nothing redelivers them, so a fresh one cannot be a duplicate.
    messageId: randomUUID(),
    chat: inChannel ? { id: ircLower(p.target), type: 'group' } : { id: p.from.nick, type: 'dm' },
    sender: { id: senderId(p.from, p.allowFrom), name: p.from.nick, isBot: false },
    text: inChannel ? p.text.replace(lead, '') : p.text,
    attachments: [],
    addressed,
    receivedAt: Date.now(),
  };
}
