import type { Attachment, ChannelMessage } from '../../src/contracts/message.js';

/** A room event as /sync gives it (only what the bot reads). */
export interface MatrixEvent {
  type?: unknown;
  event_id?: unknown;
  sender?: unknown;
  origin_server_ts?: unknown;
  state_key?: unknown;
  content?: unknown;
}

export interface SyncResponse {
  next_batch?: unknown;
  rooms?: {
    /** `limited`: more events came than the filter's timeline limit; the older ones are left out, to be read back from `prev_batch`. */
    join?: Record<string, { timeline?: { events?: unknown[]; limited?: unknown; prev_batch?: unknown }; state?: { events?: unknown[] } }>;
    invite?: Record<string, { invite_state?: { events?: unknown[] } }>;
  };
  account_data?: { events?: unknown[] };
}

export const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** What normalizing needs to know about the bot and the room. */
export interface RoomView {
  self: string;
  /** The bot's display name, if it has one (a mention by name counts). */
  selfName: string | undefined;
  roomId: string;
  dm: boolean;
  /** Whether an event id is one of the bot's own messages (a reply to it addresses the bot). */
  sentByBot(eventId: string): boolean;
}

const FILE_TYPES: Record<string, string> = { 'm.image': 'image', 'm.file': 'file', 'm.audio': 'audio', 'm.video': 'video' };

function attachmentsOf(c: Record<string, unknown>): Attachment[] {
  const type = typeof c.msgtype === 'string' ? FILE_TYPES[c.msgtype] : undefined;
  // An encrypted file (`file` instead of `url`) cannot be read without the room's keys.
  if (!type || typeof c.url !== 'string' || !c.url.startsWith('mxc://')) return [];
  const info = isObject(c.info) ? c.info : {};
  const name = typeof c.filename === 'string' ? c.filename : typeof c.body === 'string' ? c.body : undefined;
  return [
    {
      id: c.url,
      type,
      ...(name ? { name: name.slice(0, 255) } : {}),
      ...(typeof info.size === 'number' ? { size: info.size } : {}),
      ...(typeof info.mimetype === 'string' ? { mime: info.mimetype } : {}),
    },
  ];
}

/** A reply's body starts with the quoted original ("> <@a:b> text"); clients strip it, so do we. */
export function stripReplyFallback(body: string): string {
  const lines = body.split('\n');
  let i = 0;
  while (i < lines.length && lines[i]!.startsWith('>')) i++;
  if (i === 0) return body;
  if (lines[i] === '') i++;
  return lines.slice(i).join('\n');
}

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

function addressed(c: Record<string, unknown>, body: string, view: RoomView, replyTo: string | undefined): boolean {
  if (view.dm) return true;
  if (replyTo && view.sentByBot(replyTo)) return true;
  // Intentional mentions (spec v1.7): where a client sends m.mentions, it is the whole truth.
  const mentions = c['m.mentions'];
  if (isObject(mentions)) return Array.isArray(mentions.user_ids) && mentions.user_ids.includes(view.self);
  // Older clients: the user id, a matrix.to pill of it, or the display name as a word.
  if (body.includes(view.self)) return true;
  if (typeof c.formatted_body === 'string' && c.formatted_body.includes(`matrix.to/#/${view.self}`)) return true;
  return view.selfName ? new RegExp(`(^|\\W)${escapeRe(view.selfName)}(\\W|$)`, 'i').test(body) : false;
}

/**
 * A timeline event as a ChannelMessage, or undefined for what is not a new message from
 * someone else: state, edits, reactions, redactions, the bot's own messages.
 */
export function normalizeEvent(e: MatrixEvent, channelId: string, view: RoomView): ChannelMessage | undefined {
  if (e.type !== 'm.room.message' || typeof e.event_id !== 'string' || typeof e.sender !== 'string' || !isObject(e.content)) return undefined;
  if (e.sender === view.self) return undefined;
  const c = e.content;
  const relates = isObject(c['m.relates_to']) ? c['m.relates_to'] : {};
  // An edit replaces a message the bot has seen already; it is not a new question.
  if (relates.rel_type === 'm.replace') return undefined;
  if (typeof c.msgtype !== 'string' || typeof c.body !== 'string') return undefined;
  const inReply = isObject(relates['m.in_reply_to']) && typeof relates['m.in_reply_to'].event_id === 'string' ? relates['m.in_reply_to'].event_id : undefined;
  // A message in a thread (m.thread) is answered in that thread.
  const thread = relates.rel_type === 'm.thread' && typeof relates.event_id === 'string' ? relates.event_id : undefined;
  const attachments = attachmentsOf(c);
  const body = inReply ? stripReplyFallback(c.body) : c.body;
  return {
    channelId,
    kind: 'matrix',
    messageId: e.event_id,
    chat: { id: view.roomId, type: view.dm ? 'dm' : 'group' },
    ...(thread ? { threadId: thread } : {}),
    // m.notice is what bots send by convention: allow_bots decides about them.
    sender: { id: e.sender, name: e.sender, isBot: c.msgtype === 'm.notice' },
    // A file's body is its name, unless `filename` says the name and the body is a caption (spec v1.10).
    text: attachments.length && !(typeof c.filename === 'string' && c.filename !== c.body) ? '' : body,
    attachments,
    ...(inReply ? { replyTo: inReply } : {}),
    addressed: addressed(c, body, view, inReply),
    receivedAt: typeof e.origin_server_ts === 'number' ? e.origin_server_ts : Date.now(),
  };
}

/** The invite for `self` in an invited room's stripped state: who invited and whether it is a direct chat. */
export function inviteOf(events: unknown[] | undefined, self: string): { inviter: string; direct: boolean } | undefined {
  for (const e of events ?? []) {
    if (!isObject(e) || e.type !== 'm.room.member' || e.state_key !== self || !isObject(e.content)) continue;
    if (e.content.membership !== 'invite' || typeof e.sender !== 'string') continue;
    return { inviter: e.sender, direct: e.content.is_direct === true };
  }
  return undefined;
}

/** The room ids of an `m.direct` account data content (user id → room ids). */
export function directRooms(content: unknown): Set<string> {
  const out = new Set<string>();
  if (!isObject(content)) return out;
  for (const rooms of Object.values(content)) if (Array.isArray(rooms)) for (const r of rooms) if (typeof r === 'string') out.add(r);
  return out;
}
