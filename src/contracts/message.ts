/**
 * An attachment as the platform described it. Adapters never download while normalizing;
 * the turn asks the adapter's `download` for the bytes it needs.
 */
export interface Attachment {
  /** The platform's id for the file (a file id, an upload id). */
  id: string;
  /** The platform's kind: `photo`, `document`, `voice`, `image`, a platform's file type, ... */
  type: string;
  name?: string;
  /** Bytes, as the platform reported them before any download. */
  size?: number;
  mime?: string;
  /** How long a voice note or audio file plays, when the platform says. */
  durationMs?: number;
  /** Where the platform serves it (a CDN URL, a private file URL), when it says. */
  url?: string;
}

/**
 * The only shape that crosses from `channels/` into `src/`. Platform payloads never go
 * past the adapter.
 */
export interface ChannelMessage {
  /** The channel's config alias. */
  channelId: string;
  /** The channel's kind as its descriptor names it (`type` in the config). */
  kind: string;
  /** The platform's id, unique within the channel: the inbox dedupes on it. */
  messageId: string;
  chat: { id: string; type: 'dm' | 'group' | 'channel' };
  threadId?: string;
  sender: { id: string; name: string; isBot: boolean };
  text: string;
  attachments: Attachment[];
  /** The platform id of the message this one replies to. */
  replyTo?: string;
  /** Mentioned, replied to, or a DM: whether the bot is being spoken to. */
  addressed: boolean;
  /** ms since the epoch. */
  receivedAt: number;
  /**
   * Set only by the daemon for a message no platform sent (a reminder or `[[schedules]]`
   * firing, a background tool call's result): it has no platform message to reply to or react on. Adapters never set it.
   * A schedule's firing passes the access rules (the operator configured it) and is
   * answered by `agent` when set. A `tool_result` is a background tool call's result coming
   * back as a follow-up turn of `agent` (src/tools/tool-calls.ts), from the sender who started it.
   */
  synthetic?: { kind: 'reminder' | 'schedule' | 'tool_result'; id: string; agent?: string };
}

/** Where a reply goes: a chat and optionally a thread, replying to a message. */
export interface ReplyTarget {
  channelId: string;
  chatId: string;
  chatType: ChannelMessage['chat']['type'];
  threadId?: string;
  /** The user's message the reply answers (a platform's reply reference). */
  replyToMessageId?: string;
  /** Who sent that message: a platform may address the answer to them (a stream's recipient). */
  senderId?: string;
}

/** A sent platform message, enough to edit or delete it later. */
export interface MessageRef {
  chatId: string;
  messageId: string;
  threadId?: string;
}

/**
 * The conversation scope `channelId:chatId[:threadId][:senderId]`. Sessions, lanes and
 * `/stop` key on it. In groups with `scope = "sender"`, each person has their own.
 */
export function conversationScope(msg: ChannelMessage, scope: 'chat' | 'sender' = 'chat'): string {
  let key = `${msg.channelId}:${msg.chat.id}`;
  if (msg.threadId) key += `:${msg.threadId}`;
  if (scope === 'sender' && msg.chat.type !== 'dm') key += `:${msg.sender.id}`;
  return key;
}

/** The channel a conversation scope belongs to (its first part). */
export function channelOfScope(scope: string): string {
  return scope.slice(0, scope.indexOf(':'));
}

export function replyTargetOf(msg: ChannelMessage): ReplyTarget {
  return {
    channelId: msg.channelId,
    chatId: msg.chat.id,
    chatType: msg.chat.type,
    ...(msg.threadId ? { threadId: msg.threadId } : {}),
    ...(msg.synthetic ? {} : { replyToMessageId: msg.messageId, senderId: msg.sender.id }),
  };
}
