import { ChannelType, type Client, type GuildBasedChannel, PermissionFlagsBits, Routes } from 'discord.js';
import type { Logger } from 'pino';
import { ChannelError, errorMessage } from '../../src/contracts/errors.js';
import { platformCaller } from '../../src/util/platform-call.js';
import { classifyDiscordError } from './errors.js';

/**
 * The most channels whose archived threads one catch-up lists (the most recently active
 * first). Each is one request before any message is read (two for a text channel: its public
 * and its joined private threads), so 25 keeps the listing to the size of the reads it leads
 * to (CATCH_UP_MAX_CHANNELS, 50) while covering a server's few dozen busy channels.
 */
export const CATCH_UP_MAX_THREAD_PARENTS = 25;
/** Threads asked for per listing: one page, newest archived first. Discord documents no bound; 50 is its usual default, 100 the usual maximum. */
export const ARCHIVED_THREADS_PAGE = 50;

/** Channels that hold threads: text, announcement, forum and media (a forum's kind for files). */
const PARENT_TYPES: ReadonlySet<ChannelType> = new Set([ChannelType.GuildText, ChannelType.GuildAnnouncement, ChannelType.GuildForum, ChannelType.GuildMedia]);

/** A thread channel object as a listing carries it, as far as the catch-up reads it. */
interface ApiThread {
  id: string;
  guild_id?: string;
  last_message_id?: string | null;
  thread_metadata?: { archived?: boolean; archive_timestamp?: string };
}

/** An archived thread to read: `last` its newest message, `data` for discord.js's cache (see `rememberThread`). */
export interface ArchivedThread {
  id: string;
  guildId: string;
  last: bigint;
  data: ApiThread;
}

export interface ArchivedScope {
  client: Client;
  shard: number;
  shardCount: number;
  guilds: readonly string[];
  log: Logger;
  channel: string;
  signal: AbortSignal;
}

const SNOWFLAKE = /^\d{1,20}$/;
/** Each listing: cut by the catch-up's signal or the request timeout, failures sorted as every Discord request's. */
const call = platformCaller(classifyDiscordError);

/**
 * The channels whose archived threads are listed, the most recently active first: a parent's
 * own last message says nothing of its threads (a message in a thread does not move it), so
 * none is left out for being quiet; its activity is the newest of its last message and the
 * threads of it discord.js knows (a forum's posts are threads). Unknown activity goes last.
 */
function parentsToList(o: ArchivedScope, inShard: (guildId: string) => boolean): Array<{ ch: GuildBasedChannel; active?: bigint }> {
  const me = o.client.user;
  const parents: Array<{ ch: GuildBasedChannel; active?: bigint }> = [];
  for (const ch of o.client.channels.cache.values()) {
    if (ch.isDMBased() || !PARENT_TYPES.has(ch.type) || !inShard(ch.guildId)) continue;
    // Discord asks READ_MESSAGE_HISTORY for the listing; unknown (the bot's member not cached): tried, and a refusal skips it.
    const perms = me ? ch.permissionsFor(me) : null;
    if (perms && !perms.has([PermissionFlagsBits.ViewChannel, PermissionFlagsBits.ReadMessageHistory])) continue;
    let active: bigint | undefined;
    const ids = [('lastMessageId' in ch ? ch.lastMessageId : null) ?? undefined];
    if ('threads' in ch) for (const t of ch.threads.cache.values()) ids.push(t.lastMessageId ?? t.id);
    for (const id of ids) if (id && SNOWFLAKE.test(id) && (active === undefined || BigInt(id) > active)) active = BigInt(id);
    parents.push({ ch, ...(active !== undefined ? { active } : {}) });
  }
  return parents.sort((a, b) => (a.active === b.active ? 0 : a.active === undefined ? 1 : b.active === undefined ? -1 : a.active > b.active ? -1 : 1));
}

/**
 * The threads archived since `sinceMs` with a message after `after`, listed with one page per
 * channel, at most CATCH_UP_MAX_THREAD_PARENTS channels: public threads, and in text channels
 * the private threads the bot joined (the bot needs no MANAGE_THREADS for those, and a private
 * thread it was added to is one where it is asked things). A channel the bot may not list
 * (403, 404) is skipped at debug; another failure (a 5xx, a timeout) is warned and counted in
 * `failed` (the cursor then stays, as for a channel that could not be read).
 */
export async function archivedThreadsToRead(
  o: ArchivedScope,
  inShard: (guildId: string) => boolean,
  after: bigint,
  sinceMs: number,
): Promise<{ threads: ArchivedThread[]; failed: number }> {
  const parents = parentsToList(o, inShard);
  if (parents.length > CATCH_UP_MAX_THREAD_PARENTS)
    o.log.warn(
      { channel: o.channel, shard: o.shard, parents: parents.length, maxParents: CATCH_UP_MAX_THREAD_PARENTS },
      'more Discord channels hold threads than one catch-up lists the archived threads of: the least recently active are skipped',
    );
  const found = new Map<string, ArchivedThread>();
  let failed = 0;
  const query = new URLSearchParams({ limit: String(ARCHIVED_THREADS_PAGE) });
  for (const { ch } of parents.slice(0, CATCH_UP_MAX_THREAD_PARENTS)) {
    const routes = [Routes.channelThreads(ch.id, 'public'), ...(ch.type === ChannelType.GuildText ? [Routes.channelJoinedArchivedThreads(ch.id)] : [])];
    for (const route of routes) {
      let page: unknown;
      try {
        page = await call('catch-up threads', o.signal, (signal) => o.client.rest.get(route, { query, signal }));
      } catch (err) {
        if (o.signal.aborted) throw err;
        const status = err instanceof ChannelError ? (err.cause as { status?: unknown } | undefined)?.status : undefined;
        // Missing access (403) or a channel gone (404): an expected state, not a fault.
        const expected = status === 403 || status === 404;
        if (!expected) failed++;
        o.log[expected ? 'debug' : 'warn'](
          { channel: o.channel, discordChannel: ch.id, route, err: errorMessage(err) },
          expected
            ? "Discord channel's archived threads not listable; their catch-up is skipped"
            : "Discord channel's archived threads could not be listed now; the cursor stays, so the next catch-up lists them again",
        );
        // The channel is skipped: its other listing would meet the same refusal or outage.
        break;
      }
      for (const t of keptThreads(o, ch, page, after, sinceMs)) found.set(t.id, t);
    }
  }
  return { threads: [...found.values()], failed };
}

/** The threads of one page archived at or after `sinceMs` whose newest message is after `after`; a full page still inside that time is warned of. */
function keptThreads(o: ArchivedScope, parent: GuildBasedChannel, page: unknown, after: bigint, sinceMs: number): ArchivedThread[] {
  const body = (page ?? {}) as { threads?: unknown; has_more?: unknown };
  const listed = Array.isArray(body.threads) ? (body.threads as ApiThread[]).filter((t) => typeof t?.id === 'string' && SNOWFLAKE.test(t.id)) : [];
  const archivedMs = (t: ApiThread) => Date.parse(t.thread_metadata?.archive_timestamp ?? '');
  const last = listed.at(-1);
  // One page per channel: one ending in a thread archived since the cursor may have more such past it.
  if (body.has_more === true && last && archivedMs(last) >= sinceMs)
    o.log.warn(
      { channel: o.channel, discordChannel: parent.id, threads: listed.length },
      'more Discord threads were archived in this channel while away than one listing returns: threads past the page are not caught up',
    );
  const kept: ArchivedThread[] = [];
  for (const t of listed) {
    const lastId = t.last_message_id;
    if (!(archivedMs(t) >= sinceMs) || !lastId || !SNOWFLAKE.test(lastId) || BigInt(lastId) <= after) continue;
    kept.push({ id: t.id, guildId: parent.guildId, last: BigInt(lastId), data: { ...t, guild_id: parent.guildId } });
  }
  return kept;
}

/** discord.js's ChannelManager `_add` (not public API: ThreadManager.fetchArchived caches listed threads through it alike). */
type AddChannel = { _add(data: unknown, guild: unknown): unknown };

/**
 * Puts a listed thread in discord.js's cache, so its messages are sorted as a live one's are
 * (thread and parent come from the cached channel). Archived threads are swept after 4 h.
 */
export function rememberThread(client: Client, t: ArchivedThread): void {
  const guild = client.guilds.cache.get(t.guildId);
  if (guild) (client.channels as unknown as AddChannel)._add(t.data, guild);
}
