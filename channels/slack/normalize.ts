import type { ChannelMessage } from '../../src/contracts/message.js';

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
  /** The sender's team (user_team where Slack Connect shares the channel across teams). */
  team?: string;
  user_team?: string;
  files?: Array<{ id: string; name?: string; mimetype?: string; filetype?: string; size?: number; url_private?: string; url_private_download?: string }>;
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
    attachments: (e.files ?? []).map((f) => ({
      id: f.id,
      type: f.filetype ?? 'file',
      ...(f.name ? { name: f.name } : {}),
      ...(f.size ? { size: f.size } : {}),
      ...(f.mimetype ? { mime: f.mimetype } : {}),
      ...(f.url_private_download || f.url_private ? { url: (f.url_private_download ?? f.url_private)! } : {}),
    })),
    addressed: isDm || mentioned,
    receivedAt: Math.round(Number(e.ts) * 1000),
  };
}

/** Our buttons' action_id prefix (`channeld_button_0`, …): their clicks are ours to take. */
export const BUTTON_ACTION_PREFIX = 'channeld_button';
export const BUTTON_ACTION = new RegExp(`^${BUTTON_ACTION_PREFIX}_\\d+$`);

/** The parts of a block_actions payload we read. */
export interface SlackBlockActions {
  type: 'block_actions';
  user: { id: string; name?: string; username?: string; team_id?: string };
  team?: { id: string };
  channel?: { id: string };
  container: { channel_id?: string; message_ts?: string; thread_ts?: string };
  message?: { ts: string; thread_ts?: string };
  trigger_id?: string;
  actions: Array<{ action_id: string; value?: string; action_ts: string }>;
}

/** A button click as the clicker's message: its text is the button's value. */
export function normalizeAction(body: SlackBlockActions, action: SlackBlockActions['actions'][number], channelId: string): ChannelMessage | undefined {
  const channel = body.channel?.id ?? body.container.channel_id;
  if (!channel || action.value === undefined) return undefined;
  const threadId = body.message?.thread_ts ?? body.container.thread_ts;
  return {
    channelId,
    kind: 'slack',
    messageId: `action:${channel}:${action.action_ts}:${body.user.id}`,
    chat: { id: channel, type: channel.startsWith('D') ? 'dm' : 'group' },
    ...(threadId ? { threadId } : {}),
    sender: { id: body.user.id, name: body.user.name ?? body.user.username ?? body.user.id, isBot: false },
    text: action.value,
    attachments: [],
    ...(body.message?.ts ? { replyTo: body.message.ts } : {}),
    // A click on the bot's own button is always meant for the bot.
    addressed: true,
    receivedAt: Math.round(Number(action.action_ts) * 1000),
  };
}
