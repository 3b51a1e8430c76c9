import type { ButtonInteraction, Message } from 'discord.js';
import type { ChannelMessage } from '../../src/contracts/message.js';

/** A discord.js Message as a ChannelMessage; undefined for guilds outside the allowlist. */
export function normalizeMessage(m: Message, channelId: string, botId: string, guilds: readonly string[]): ChannelMessage | undefined {
  if (m.guildId && guilds.length && !guilds.includes(m.guildId)) return undefined;
  const isDm = !m.guildId;
  const inThread = m.channel?.isThread?.() ?? false;
  const parentId = inThread && 'parentId' in m.channel ? (m.channel.parentId ?? m.channelId) : m.channelId;
  const mentioned = m.mentions.users.has(botId) || new RegExp(`<@!?${botId}>`).test(m.content);
  const repliedToBot = m.mentions.repliedUser?.id === botId;
  const text = m.content.replace(new RegExp(`<@!?${botId}>\\s*`, 'g'), '').trim();
  return {
    channelId,
    kind: 'discord',
    messageId: m.id,
    chat: { id: isDm ? m.channelId : parentId, type: isDm ? 'dm' : 'group' },
    ...(inThread ? { threadId: m.channelId } : {}),
    sender: { id: m.author.id, name: m.author.globalName ?? m.author.username, isBot: m.author.bot },
    text,
    attachments: [...m.attachments.values()].map((a) => ({
      id: a.id,
      type: a.contentType?.split('/')[0] ?? 'file',
      name: a.name,
      size: a.size,
      ...(a.contentType ? { mime: a.contentType } : {}),
      ...(a.duration ? { durationMs: Math.round(a.duration * 1000) } : {}), // a voice message's length, in seconds
      url: a.url,
    })),
    ...(m.reference?.messageId ? { replyTo: m.reference.messageId } : {}),
    addressed: isDm || mentioned || repliedToBot,
    receivedAt: m.createdTimestamp,
  };
}

/** A button click as the clicker's message: its text is the button's `custom_id`. */
export function normalizeButton(i: ButtonInteraction, channelId: string): ChannelMessage {
  const isDm = !i.guildId;
  const inThread = i.channel?.isThread?.() ?? false;
  const parentId = inThread && i.channel && 'parentId' in i.channel ? (i.channel.parentId ?? i.channelId) : i.channelId;
  return {
    channelId,
    kind: 'discord',
    messageId: `interaction:${i.id}`,
    chat: { id: isDm ? i.channelId : parentId, type: isDm ? 'dm' : 'group' },
    ...(inThread ? { threadId: i.channelId } : {}),
    sender: { id: i.user.id, name: i.user.globalName ?? i.user.username, isBot: i.user.bot },
    text: i.customId,
    attachments: [],
    replyTo: i.message.id,
    // A click on the bot's own button is always meant for the bot.
    addressed: true,
    receivedAt: i.createdTimestamp,
  };
}
