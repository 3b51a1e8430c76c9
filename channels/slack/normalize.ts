import type { ChannelMessage } from '../../src/dispatch/message.js';

export interface SlackEvent {
  type: string;
  subtype?: string;
  channel: string;
  channel_type?: string;
  user?: string;
  bot_id?: string;
  text?: string;
  ts: string;
  thread_ts?: string;
  files?: Array<{ id: string; name?: string; mimetype?: string; filetype?: string; size?: number }>;
}

/** Subtypes that are new messages; edits, deletes, joins and bot posts are not. */
const NEW_MESSAGE_SUBTYPES = new Set([undefined, 'file_share', 'thread_broadcast']);

/**
 * A `message` or `app_mention` event as a ChannelMessage. A top-level channel mention starts
 * a thread (replies go there), so the thread is its conversation from the first message.
 */
export function normalizeEvent(e: SlackEvent, channelId: string, botUserId: string, replyInThread: boolean): ChannelMessage | undefined {
  if (e.type !== 'message' && e.type !== 'app_mention') return undefined;
  // Signed by Slack but missing what every message has: nothing to answer.
  if (typeof e.channel !== 'string' || typeof e.ts !== 'string') return undefined;
  if (!NEW_MESSAGE_SUBTYPES.has(e.subtype) || !e.user) return undefined;
  const isDm = e.channel_type === 'im' || e.channel.startsWith('D');
  const text = e.text ?? '';
  const mentioned = e.type === 'app_mention' || text.includes(`<@${botUserId}>`);
  const threadId = e.thread_ts ?? (!isDm && replyInThread && mentioned ? e.ts : undefined);
  return {
    channelId,
    kind: 'slack',
    messageId: `${e.channel}:${e.ts}`,
    chat: { id: e.channel, type: isDm ? 'dm' : 'group' },
    ...(threadId ? { threadId } : {}),
    sender: { id: e.user, name: e.user, isBot: Boolean(e.bot_id) },
    text: text.replace(new RegExp(`<@${botUserId}>\\s*`, 'g'), '').trim(),
    attachments: (e.files ?? []).map((f) => ({ id: f.id, type: f.filetype ?? 'file', ...(f.name ? { name: f.name } : {}), ...(f.size ? { size: f.size } : {}), ...(f.mimetype ? { mime: f.mimetype } : {}) })),
    addressed: isDm || mentioned,
    receivedAt: Math.round(Number(e.ts) * 1000),
  };
}
