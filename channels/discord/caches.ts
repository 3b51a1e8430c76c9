import { type CacheFactory, type Client, Options, type SweeperOptions } from 'discord.js';

/** The bot's own user, member or thread membership: kept whatever the bound (discord.js reads it for permissions and `joined`). */
const isSelf = (x: { id: string; client: Client }): boolean => x.id === x.client.user?.id;
const onlySelf = { maxSize: 0, keepOverLimit: isSelf } as const;

/**
 * discord.js caches every structure the gateway sends: each message (200 per channel by
 * default), each author (users), each guild member a message carries, each DM channel. A big
 * guild or a spam wave grows them without end, and the adapter reads none of them: a message
 * is normalised from the event itself (its author, mentions and attachments come with it),
 * replies go over the adapter's own REST client by id. What it does read stays: the guilds
 * and their channels and threads (a message's `channel`, for thread and parent), the bot's
 * own user (`client.user`) and application (handover). discord.js forbids bounding
 * GuildManager, ChannelManager, GuildChannelManager, RoleManager and
 * PermissionOverwriteManager; those hold what Discord bounds per guild, except DM channels,
 * which the adapter drops itself (see `forgetDmChannel`).
 */
export const DISCORD_CACHE_LIMITS = {
  MessageManager: 0,
  UserManager: onlySelf,
  GuildMemberManager: onlySelf,
  ThreadMemberManager: onlySelf,
  PresenceManager: 0,
  VoiceStateManager: 0,
  ReactionManager: 0,
  ReactionUserManager: 0,
  BaseGuildEmojiManager: 0,
  GuildEmojiManager: 0,
  ApplicationEmojiManager: 0,
  GuildStickerManager: 0,
  GuildBanManager: 0,
  GuildInviteManager: 0,
  GuildScheduledEventManager: 0,
  StageInstanceManager: 0,
  AutoModerationRuleManager: 0,
  ApplicationCommandManager: 0,
  EntitlementManager: 0,
} as const;

/** For `new Client({ ...boundedCaches() })`. Threads keep discord.js's sweeper (archived ones go after 4 h). */
export function boundedCaches(): { makeCache: CacheFactory; sweepers: SweeperOptions } {
  return { makeCache: Options.cacheWithLimits(DISCORD_CACHE_LIMITS), sweepers: Options.DefaultSweeperSettings };
}

/**
 * A DM channel is cached for each user who writes to the bot (Partials.Channel makes one from
 * the event), and ChannelManager may not be bounded: once its message or click is read, the
 * channel goes. The next DM makes it again from the event; replies need only its id.
 */
export function forgetDmChannel(client: Client, channelId: string | null | undefined, guildId: string | null | undefined): void {
  if (channelId && !guildId && client.channels.cache.get(channelId)?.isDMBased()) client.channels.cache.delete(channelId);
}

/** How many entries the live client holds, summed over guilds and channels: for tests and diagnostics. */
export function cacheSizes(client: Client): Record<'guilds' | 'channels' | 'dmChannels' | 'threads' | 'messages' | 'users' | 'members' | 'presences', number> {
  let messages = 0;
  let dmChannels = 0;
  let threads = 0;
  for (const ch of client.channels.cache.values()) {
    if (ch.isDMBased()) dmChannels++;
    if (ch.isThread()) threads++;
    if (ch.isTextBased()) messages += ch.messages.cache.size;
  }
  let members = 0;
  let presences = 0;
  for (const g of client.guilds.cache.values()) {
    members += g.members.cache.size;
    presences += g.presences.cache.size;
  }
  return {
    guilds: client.guilds.cache.size,
    channels: client.channels.cache.size,
    dmChannels,
    threads,
    messages,
    users: client.users.cache.size,
    members,
    presences,
  };
}
