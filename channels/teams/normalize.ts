import type { Attachment, ChannelMessage } from '../../src/contracts/message.js';

/** The part of a Bot Framework activity the bot reads. */
export interface Activity {
  type?: unknown;
  id?: unknown;
  timestamp?: unknown;
  serviceUrl?: unknown;
  channelId?: unknown;
  from?: { id?: unknown; name?: unknown; aadObjectId?: unknown; role?: unknown };
  conversation?: { id?: unknown; conversationType?: unknown; tenantId?: unknown };
  recipient?: { id?: unknown; name?: unknown };
  text?: unknown;
  value?: unknown;
  replyToId?: unknown;
  entities?: unknown;
  attachments?: unknown;
  channelData?: { tenant?: { id?: unknown } };
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * The Bot Framework channel id of Teams. The same Azure Bot serves other channels (Web Chat
 * and Direct Line are on by default), whose users choose their own `from.id` and can write
 * any `channelData`: only Teams' activities carry an identity and a tenant Teams vouches for.
 */
export const TEAMS_CHANNEL_ID = 'msteams';

/** What a button's Action.Submit `data` carries: the command text a click sends back. */
export const SUBMIT_KEY = 'channeld';

/** Why an activity cannot be read, or undefined when it is fine (other activity types are fine: they carry no message). */
export function malformedActivity(a: unknown): string | undefined {
  if (!isObject(a)) return 'the activity is not a JSON object';
  if (typeof a.type !== 'string') return 'an activity without type';
  if (typeof a.serviceUrl !== 'string' || !/^https?:\/\//.test(a.serviceUrl)) return 'an activity without a serviceUrl';
  if (a.type !== 'message') return undefined;
  if (typeof a.id !== 'string' || !isObject(a.conversation) || typeof a.conversation.id !== 'string') return 'a message without id or conversation';
  if (!isObject(a.from) || typeof a.from.id !== 'string') return 'a message without a sender';
  return undefined;
}

/** The tenant an activity belongs to (conversation.tenantId, or channelData.tenant.id). */
export function tenantOf(a: Activity): string | undefined {
  const t = a.conversation?.tenantId ?? a.channelData?.tenant?.id;
  return typeof t === 'string' ? t : undefined;
}

/** The message ids this channel uses: the conversation and the activity, as the Connector needs both to reply. */
export const messageIdOf = (conversationId: string, activityId: string) => `${conversationId}|${activityId}`;
export const activityIdOf = (messageId: string) => messageId.slice(messageId.lastIndexOf('|') + 1);

function attachmentsOf(a: Activity): Attachment[] {
  if (!Array.isArray(a.attachments)) return [];
  const out: Attachment[] = [];
  for (const x of a.attachments.slice(0, 10)) {
    if (!isObject(x) || typeof x.contentType !== 'string') continue;
    // Files in a 1:1 chat: a download link the bot may fetch without further auth.
    if (x.contentType === 'application/vnd.microsoft.teams.file.download.info' && isObject(x.content) && typeof x.content.downloadUrl === 'string')
      out.push({ id: x.content.downloadUrl, type: 'file', url: x.content.downloadUrl, ...(typeof x.name === 'string' ? { name: x.name.slice(0, 255) } : {}) });
    // Inline images pasted in chat: served by the Connector, with the bot's token.
    else if (x.contentType.startsWith('image/') && typeof x.contentUrl === 'string')
      out.push({
        id: x.contentUrl,
        type: 'image',
        mime: x.contentType,
        url: x.contentUrl,
        ...(typeof x.name === 'string' ? { name: x.name.slice(0, 255) } : {}),
      });
  }
  return out;
}

/**
 * A message activity as a ChannelMessage, or undefined for anything else (typing, updates,
 * conversation updates). A card button (Action.Submit) arrives as a message whose `value`
 * holds our `data`: that is the clicker's command. `<at>` tags become plain `@name`.
 */
export function normalizeActivity(a: Activity, channelId: string): ChannelMessage | undefined {
  if (malformedActivity(a) || a.type !== 'message') return undefined;
  const conversation = a.conversation!.id as string;
  const kind = a.conversation!.conversationType;
  const type = kind === 'channel' ? 'channel' : kind === 'groupChat' ? 'group' : 'dm';
  const botId = typeof a.recipient?.id === 'string' ? a.recipient.id : undefined;
  const submitted = isObject(a.value) && typeof a.value[SUBMIT_KEY] === 'string' ? (a.value[SUBMIT_KEY] as string) : undefined;
  const raw = submitted ?? (typeof a.text === 'string' ? a.text : '');
  const ofBot = (Array.isArray(a.entities) ? a.entities : []).filter(
    (e): e is Record<string, unknown> => isObject(e) && e.type === 'mention' && isObject(e.mentioned) && botId !== undefined && e.mentioned.id === botId,
  );
  const mentioned = ofBot.length > 0;
  // The bot's own mention is taken out (as the Bot Framework SDKs do), so "@Bot /stop" is the command /stop.
  let text = raw;
  for (const e of ofBot) if (typeof e.text === 'string' && e.text) text = text.replace(e.text, '');
  const from = a.from!;
  const aad = typeof from.aadObjectId === 'string' ? from.aadObjectId : undefined;
  return {
    channelId,
    kind: 'teams',
    messageId: messageIdOf(conversation, a.id as string),
    chat: { id: conversation, type },
    sender: {
      id: aad ?? (from.id as string),
      name: typeof from.name === 'string' && from.name ? from.name : (aad ?? (from.id as string)),
      isBot: from.role === 'bot',
    },
    text: text.replace(/<at>([^<]*)<\/at>/g, '@$1').trim(),
    attachments: attachmentsOf(a),
    ...(typeof a.replyToId === 'string' ? { replyTo: a.replyToId } : {}),
    // A 1:1 chat, a mention of the bot, or a click on the bot's own card.
    addressed: type === 'dm' || mentioned || submitted !== undefined,
    receivedAt: typeof a.timestamp === 'string' && !Number.isNaN(Date.parse(a.timestamp)) ? Date.parse(a.timestamp) : Date.now(),
  };
}
