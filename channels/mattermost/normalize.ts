import type { ChannelMessage } from '../../src/contracts/message.js';

/** A Mattermost post, as far as we read it. */
export interface MmPost {
  id: string;
  create_at: number;
  delete_at?: number;
  user_id: string;
  channel_id: string;
  root_id?: string;
  message?: string;
  type?: string;
  props?: { from_bot?: string | boolean; from_webhook?: string };
  metadata?: { files?: Array<{ id: string; name?: string; extension?: string; size?: number; mime_type?: string }> };
}

/** Where a post was written: the channel's type (`D` direct, `G` group, `O` open, `P` private), name and team. */
export interface MmWhere {
  channelType: string;
  channelName: string | undefined;
  teamId: string | undefined;
  senderName: string | undefined;
  /** User ids the server says the post mentions (the `posted` event's `mentions`). */
  mentions: readonly string[];
}

/** The bot's account and the teams and channels it may answer in. */
export interface MmScope {
  botId: string;
  botName: string;
  /** Team ids and names; empty: all. */
  teams: ReadonlySet<string>;
  /** Channel ids and names; empty: all. */
  channels: ReadonlySet<string>;
  /** Team id → name, to match `teams` given by name. */
  teamNames: ReadonlyMap<string, string>;
}

/** A `posted` event's `data`: Mattermost sends the post (and the mentions) as JSON strings. */
export interface MmPostedData {
  post?: string;
  channel_type?: string;
  channel_name?: string;
  team_id?: string;
  sender_name?: string;
  mentions?: string;
}

/** The post and where it was written from a `posted` event; undefined when it cannot be read. */
export function readPosted(data: MmPostedData | undefined): { post: MmPost; where: MmWhere } | undefined {
  if (!data || typeof data.post !== 'string') return undefined;
  let post: MmPost;
  let mentions: unknown = [];
  try {
    post = JSON.parse(data.post) as MmPost;
    if (data.mentions) mentions = JSON.parse(data.mentions);
  } catch {
    return undefined;
  }
  if (!post || typeof post.id !== 'string' || typeof post.channel_id !== 'string' || typeof post.user_id !== 'string') return undefined;
  return {
    post,
    where: {
      channelType: data.channel_type ?? 'O',
      channelName: data.channel_name,
      teamId: data.team_id || undefined,
      senderName: data.sender_name?.replace(/^@/, ''),
      mentions: Array.isArray(mentions) ? mentions.filter((m): m is string => typeof m === 'string') : [],
    },
  };
}

/** Why a post is not ours to take (the bot's own, a system message, outside the allowlists), or undefined. */
export function skipReason(post: MmPost, where: MmWhere, scope: MmScope): string | undefined {
  if (post.user_id === scope.botId) return 'own post';
  if (post.type) return `system post ${post.type}`;
  if (post.delete_at) return 'deleted';
  if (where.channelType === 'D' || where.channelType === 'G') return undefined;
  if (scope.teams.size && !(where.teamId && (scope.teams.has(where.teamId) || scope.teams.has(scope.teamNames.get(where.teamId) ?? ''))))
    return 'team not in teams';
  if (scope.channels.size && !(scope.channels.has(post.channel_id) || (where.channelName && scope.channels.has(where.channelName))))
    return 'channel not in channels';
  return undefined;
}

/**
 * A post as a ChannelMessage; the post id is the inbox key. A post in a thread keeps its
 * thread (`root_id`), so the answer goes there. Mattermost clients run a message that starts
 * with "/" as their own command, so users type " /stop": the text is trimmed.
 */
export function normalizePost(post: MmPost, where: MmWhere, channelId: string, scope: MmScope): ChannelMessage {
  const dm = where.channelType === 'D';
  // Usernames may hold ".", "-" and "_": "@channeld.bot" is someone else.
  const mention = new RegExp(`(^|\\s)@${scope.botName.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?![\\w.-])`, 'i');
  const raw = post.message ?? '';
  const mentioned = where.mentions.includes(scope.botId) || mention.test(raw);
  const fromBot = post.props?.from_bot === true || post.props?.from_bot === 'true';
  return {
    channelId,
    kind: 'mattermost',
    messageId: post.id,
    chat: { id: post.channel_id, type: dm ? 'dm' : 'group' },
    ...(post.root_id ? { threadId: post.root_id } : {}),
    sender: { id: post.user_id, name: where.senderName ?? post.user_id, isBot: fromBot },
    text: raw.replace(new RegExp(`${mention.source}\\s*`, 'gi'), '$1').trim(),
    attachments: (post.metadata?.files ?? []).map((f) => ({
      id: f.id,
      type: f.extension || 'file',
      ...(f.name ? { name: f.name } : {}),
      ...(typeof f.size === 'number' ? { size: f.size } : {}),
      ...(f.mime_type ? { mime: f.mime_type } : {}),
    })),
    ...(post.root_id ? { replyTo: post.root_id } : {}),
    addressed: dm || mentioned,
    receivedAt: post.create_at || Date.now(),
  };
}
