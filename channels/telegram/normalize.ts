import type { Message, Update } from 'grammy/types';
import type { Attachment, ChannelMessage } from '../../src/contracts/message.js';

export interface BotIdentity {
  id: number;
  username: string;
}

type TelegramFile = { file_id: string; file_size?: number; mime_type?: string; file_name?: string; duration?: number };

/** The message fields that carry a file, in the order their attachments are listed (a constant: a text message allocates nothing for them). */
const FILE_FIELDS = ['document', 'audio', 'video', 'voice', 'animation', 'video_note', 'sticker'] as const;

function attachmentsOf(m: Message): Attachment[] {
  const out: Attachment[] = [];
  const photo = m.photo?.at(-1); // the largest size
  if (photo) out.push({ id: photo.file_id, type: 'photo', ...(photo.file_size ? { size: photo.file_size } : {}) });
  for (const type of FILE_FIELDS) {
    const f = m[type] as TelegramFile | undefined;
    if (!f) continue;
    out.push({
      id: f.file_id,
      type,
      ...(f.file_size ? { size: f.file_size } : {}),
      ...(f.mime_type ? { mime: f.mime_type } : {}),
      ...(f.file_name ? { name: f.file_name } : {}),
      ...(f.duration ? { durationMs: f.duration * 1000 } : {}), // seconds in the Bot API
    });
  }
  return out;
}

/** Whether the bot is spoken to: a private chat, an @mention of it, or a reply to it. */
function addressed(m: Message, bot: BotIdentity): boolean {
  if (m.chat.type === 'private') return true;
  if (m.reply_to_message?.from?.id === bot.id) return true;
  const text = m.text ?? m.caption ?? '';
  const entities = m.entities ?? m.caption_entities ?? [];
  const handle = `@${bot.username}`.toLowerCase();
  return entities.some((e) => {
    const part = text.slice(e.offset, e.offset + e.length).toLowerCase();
    if (e.type === 'mention') return part === handle;
    if (e.type === 'text_mention') return e.user.id === bot.id;
    if (e.type === 'bot_command') return part.endsWith(handle);
    return false;
  });
}

const CALLBACK_PREFIX = 'cb:';

/** The callback query a delivered message came from (a button click), if any. */
export function callbackQueryId(msg: ChannelMessage): string | undefined {
  return msg.messageId.startsWith(CALLBACK_PREFIX) ? msg.messageId.slice(CALLBACK_PREFIX.length) : undefined;
}

/** A button click: the clicker's message whose text is the button's callback_data. */
function normalizeCallback(q: NonNullable<Update['callback_query']>, channelId: string): ChannelMessage | undefined {
  const m = q.message;
  if (!m || typeof q.data !== 'string' || typeof q.from?.id !== 'number' || typeof m.chat?.id !== 'number') return undefined;
  const type = m.chat.type === 'private' ? 'dm' : m.chat.type === 'channel' ? 'channel' : 'group';
  const name = [q.from.first_name, q.from.last_name].filter(Boolean).join(' ') || q.from.username || String(q.from.id);
  return {
    channelId,
    kind: 'telegram',
    messageId: `${CALLBACK_PREFIX}${q.id}`,
    chat: { id: String(m.chat.id), type },
    ...('is_topic_message' in m && m.is_topic_message && m.message_thread_id !== undefined ? { threadId: String(m.message_thread_id) } : {}),
    sender: { id: String(q.from.id), name, isBot: q.from.is_bot },
    text: q.data,
    attachments: [],
    replyTo: String(m.message_id),
    // A click on the bot's own button is always meant for the bot.
    addressed: true,
    receivedAt: Date.now(),
  };
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * Why an update cannot be read (a JSON `null`, `{"message":{}}`), or undefined when it is
 * fine. Update kinds we do not handle are fine: they simply carry no message.
 */
export function malformedUpdate(u: unknown): string | undefined {
  if (!isObject(u)) return 'the update is not a JSON object';
  const m = u.message !== undefined ? u.message : u.channel_post;
  if (m === undefined) return undefined;
  if (!isObject(m) || typeof m.message_id !== 'number' || !isObject(m.chat) || typeof m.chat.id !== 'number' || typeof m.chat.type !== 'string')
    return 'a message without message_id or chat';
  if (m.from !== undefined && (!isObject(m.from) || typeof m.from.id !== 'number')) return 'a message whose sender has no id';
  return undefined;
}

/** An update as a ChannelMessage, or undefined for updates that carry no new message (or cannot be read). */
export function normalizeUpdate(u: Update, channelId: string, bot: BotIdentity): ChannelMessage | undefined {
  if (malformedUpdate(u)) return undefined;
  if (u.callback_query) return normalizeCallback(u.callback_query, channelId);
  const m = u.message ?? u.channel_post;
  if (!m) return undefined;
  const type = m.chat.type === 'private' ? 'dm' : m.chat.type === 'channel' ? 'channel' : 'group';
  const from = m.from ?? { id: m.chat.id, is_bot: false, first_name: 'title' in m.chat ? (m.chat.title ?? 'channel') : 'channel' };
  const name =
    [from.first_name, 'last_name' in from ? from.last_name : undefined].filter(Boolean).join(' ') ||
    ('username' in from ? from.username : undefined) ||
    String(from.id);
  return {
    channelId,
    kind: 'telegram',
    // message_id is unique per chat only.
    messageId: `${m.chat.id}:${m.message_id}`,
    chat: { id: String(m.chat.id), type },
    ...(m.is_topic_message && m.message_thread_id !== undefined ? { threadId: String(m.message_thread_id) } : {}),
    sender: { id: String(from.id), name, isBot: from.is_bot },
    text: m.text ?? m.caption ?? '',
    attachments: attachmentsOf(m),
    ...(m.reply_to_message ? { replyTo: String(m.reply_to_message.message_id) } : {}),
    addressed: addressed(m, bot),
    receivedAt: m.date * 1000,
  };
}
