import type { Message } from 'discord.js';
import type { ChannelMessage } from '../../src/dispatch/message.js';

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
      url: a.url,
    })),
    ...(m.reference?.messageId ? { replyTo: m.reference.messageId } : {}),
    addressed: isDm || mentioned || repliedToBot,
    receivedAt: m.createdTimestamp,
  };
}
