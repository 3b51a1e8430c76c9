import { type Client, Message, PermissionFlagsBits } from 'discord.js';
import type { Logger } from 'pino';
import { ChannelError, errorMessage } from '../../src/contracts/errors.js';
import { type ArchivedThread, archivedThreadsToRead, rememberThread } from './archived-threads.js';

/** Discord's epoch: a snowflake's top bits count milliseconds from 2015-01-01. */
const DISCORD_EPOCH_MS = 1420070400000n;
/** The most channels one catch-up reads (DMs first, then the most recently active): one request each, two when full. */
export const CATCH_UP_MAX_CHANNELS = 50;
/** The most messages one channel's catch-up delivers: one page at Discord's `limit` maximum. */
export const CATCH_UP_MAX_MESSAGES_PER_CHANNEL = 100;
/** After a long time away, a catch-up reads this far back at most: older messages are history, not questions. */
export const CATCH_UP_MAX_AGE_MS = 24 * 60 * 60 * 1000;
/** DM channels remembered for a catch-up, the newest first: Discord lists no bot's DM channels (READY's are empty). */
export const MAX_KNOWN_DM_CHANNELS = 50;
/** The smallest snowflake of a message created at or after `ms`, less one: `after=` it includes that millisecond. */
export function snowflakeBefore(ms: number): bigint {
  return ((BigInt(Math.max(Math.trunc(ms), Number(DISCORD_EPOCH_MS))) - DISCORD_EPOCH_MS) << 22n) - 1n;
}

/** The shard Discord sends a guild's events to: `(guild_id >> 22) % shards`. */
export function shardOfGuild(guildId: string, shardCount: number): number {
  return Number((BigInt(guildId) >> 22n) % BigInt(shardCount));
}

/** Reads `GET /channels/{id}/messages?{query}` (newest first); rejects with the classified error. */
export type ReadMessages = (channelId: string, query: URLSearchParams, signal: AbortSignal) => Promise<unknown>;

export interface CatchUpOptions {
  client: Client;
  /** The shard that identified anew, of how many: only its guilds are read, DMs only by shard 0 (Discord's routing). */
  shard: number;
  shardCount: number;
  /** The configured guild allowlist (empty: every guild). */
  guilds: readonly string[];
  dmChannels: readonly string[];
  /** Messages created at or after this time (ms) are read. */
  sinceMs: number;
  /** How far back it may read at all (catchUpReachMs: CATCH_UP_MAX_AGE_MS, within the inbox's duplicate window). */
  reachMs: number;
  /** When the listener's run began: what was created after it is never too old (no other instance can have answered it). */
  startedMs: number;
  read: ReadMessages;
  /** Normalises and delivers one message as a live one is; rejects when it was not stored. */
  take: (m: Message) => Promise<void>;
  log: Logger;
  /** The channeld channel's id, for log lines. */
  channel: string;
  signal: AbortSignal;
}

/** A Message as discord.js makes one from an event (its constructor is not public API: MessageManager uses it alike). */
const MessageOf = Message as unknown as new (client: Client, data: unknown) => Message;

/** A channel to read; `thread`: an archived one found by its listing, not in discord.js's cache. */
type ToRead = { id: string; guildId?: string; last?: bigint; thread?: ArchivedThread };

/** The servers this shard catches up: those Discord routes to it, within `guilds`. */
const inShardOf = (o: CatchUpOptions) => (guildId: string) =>
  (!o.guilds.length || o.guilds.includes(guildId)) && shardOfGuild(guildId, o.shardCount) === o.shard;

/** Newest activity first; unknown last. */
const byActivity = (a: ToRead, b: ToRead) => (a.last === b.last ? 0 : a.last === undefined ? 1 : b.last === undefined ? -1 : a.last > b.last ? -1 : 1);

/**
 * The channels to read: the known DM channels (bounded by their own list, so they never crowd
 * out the servers' channels), and the guild channels (the active threads among them) with a
 * message since `after` (or none known).
 */
function channelsToRead(o: CatchUpOptions, after: bigint): { dms: ToRead[]; guild: ToRead[] } {
  const guild: ToRead[] = [];
  const me = o.client.user;
  const inShard = inShardOf(o);
  for (const ch of o.client.channels.cache.values()) {
    if (ch.isDMBased() || !ch.isTextBased() || !inShard(ch.guildId)) continue;
    const last = ch.lastMessageId ? BigInt(ch.lastMessageId) : undefined;
    if (last !== undefined && last <= after) continue;
    // Unknown (the bot's member not cached): tried, and a refusal skips it.
    const perms = me ? ch.permissionsFor(me) : null;
    if (perms && !perms.has([PermissionFlagsBits.ViewChannel, PermissionFlagsBits.ReadMessageHistory])) continue;
    guild.push({ id: ch.id, guildId: ch.guildId, last });
  }
  const dms = o.shard === 0 ? o.dmChannels.map((id) => ({ id })) : [];
  return { dms, guild };
}

/** The `id`-bearing objects of an answer, oldest first (Discord pages newest first). */
function oldestFirst(page: unknown): Array<{ id: string }> {
  if (!Array.isArray(page)) return [];
  const msgs = page.filter((m): m is { id: string } => typeof m?.id === 'string' && /^\d{1,20}$/.test(m.id));
  return msgs.sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1));
}

/**
 * One channel's messages since `after`, oldest first: one page `after=` it. A full page means
 * more came than one catch-up delivers: the newest page is read instead (the newest messages
 * are the likeliest still waiting for an answer), and the ones between `after` and it are
 * skipped with a warning naming the gap. Undefined when the bot may not read the channel (403,
 * 404: skipped); 'failed' when reading it failed otherwise (a 5xx, a timeout: logged).
 */
async function readChannel(o: CatchUpOptions, id: string, after: bigint): Promise<Array<{ id: string }> | undefined | 'failed'> {
  const limit = String(CATCH_UP_MAX_MESSAGES_PER_CHANNEL);
  try {
    let page = oldestFirst(await o.read(id, new URLSearchParams({ after: String(after), limit }), o.signal));
    if (page.length < CATCH_UP_MAX_MESSAGES_PER_CHANNEL) return page;
    const newest = oldestFirst(await o.read(id, new URLSearchParams({ limit }), o.signal)).filter((m) => BigInt(m.id) > after);
    const kept = newest[0];
    // The oldest since `after` is older than the newest page: the messages between are skipped.
    if (kept && BigInt(page[0]!.id) < BigInt(kept.id))
      o.log.warn(
        { channel: o.channel, discordChannel: id, maxMessages: CATCH_UP_MAX_MESSAGES_PER_CHANNEL, firstSkipped: page[0]!.id, firstKept: kept.id },
        `more than ${limit} Discord messages were posted in this channel while away: the newest ${limit} are caught up; the older ones in the gap, from firstSkipped up to firstKept, are skipped`,
      );
    page = newest;
    return page;
  } catch (err) {
    if (o.signal.aborted) throw err;
    const status = err instanceof ChannelError ? (err.cause as { status?: unknown } | undefined)?.status : undefined;
    // Missing access (403) or a channel gone (404): an expected state, not a fault.
    const expected = status === 403 || status === 404;
    o.log[expected ? 'debug' : 'warn'](
      { channel: o.channel, discordChannel: id, err: errorMessage(err) },
      expected
        ? 'Discord channel not readable; its catch-up is skipped'
        : 'Discord channel could not be read now; the cursor stays, so the next catch-up reads it again',
    );
    return expected ? undefined : 'failed';
  }
}

/**
 * What was posted since `sinceMs` (`reachMs` back at most) in the channels the
 * shard serves: at most CATCH_UP_MAX_CHANNELS channels, CATCH_UP_MAX_MESSAGES_PER_CHANNEL
 * messages each, each channel oldest first, through `take`. The server channels are the
 * cached ones and the threads archived since (archived-threads.ts: Discord's gateway knows
 * only the active ones), the most recently active first. A channel that cannot be read is
 * skipped; a message not stored rejects (the cursor must not pass it). Returns the newest
 * creation time delivered (0: none) and how many were.
 */
export async function catchUp(o: CatchUpOptions): Promise<{ newestMs: number; delivered: number }> {
  const sinceMs = Math.max(o.sinceMs, Date.now() - o.reachMs);
  const after = snowflakeBefore(sinceMs);
  const { dms, guild } = channelsToRead(o, after);
  const archived = await archivedThreadsToRead(o, inShardOf(o), after, sinceMs);
  const cached = new Set(guild.map((c) => c.id));
  for (const t of archived.threads) if (!cached.has(t.id)) guild.push({ id: t.id, guildId: t.guildId, last: t.last, thread: t });
  guild.sort(byActivity);
  if (guild.length > CATCH_UP_MAX_CHANNELS)
    o.log.warn(
      { channel: o.channel, shard: o.shard, channels: guild.length, maxChannels: CATCH_UP_MAX_CHANNELS },
      'more Discord channels may have messages from while away than one catch-up reads: the least recently active are skipped',
    );
  let newestMs = 0;
  let delivered = 0;
  let tooOld = 0;
  let failed = archived.failed;
  for (const c of [...dms, ...guild.slice(0, CATCH_UP_MAX_CHANNELS)]) {
    // Its messages are sorted by their cached channel (thread and parent), as live ones are.
    if (c.thread) rememberThread(o.client, c.thread);
    const page = await readChannel(o, c.id, after);
    if (page === 'failed') failed++;
    for (const raw of page === 'failed' ? [] : (page ?? [])) {
      let m: Message;
      try {
        // REST messages carry no guild_id: the channel's, as the gateway event has it.
        m = new MessageOf(o.client, { ...raw, ...(c.guildId ? { guild_id: c.guildId } : {}) });
      } catch (err) {
        o.log.debug({ channel: o.channel, discordChannel: c.id, err: errorMessage(err) }, 'unreadable Discord message skipped by the catch-up');
        continue;
      }
      if (m.createdTimestamp < sinceMs) continue;
      // Checked again as each goes: a long catch-up must not hand over one the inbox no longer knows.
      if (m.createdTimestamp < Math.min(o.startedMs, Date.now() - o.reachMs)) {
        tooOld++;
        continue;
      }
      await o.take(m);
      delivered++;
      newestMs = Math.max(newestMs, m.createdTimestamp);
    }
  }
  if (tooOld)
    o.log.warn(
      { channel: o.channel, shard: o.shard, messages: tooOld, reachMs: o.reachMs },
      "Discord messages older than the inbox's duplicate window by the time the catch-up reached them were skipped (they may have been answered already)",
    );
  if (failed)
    throw new ChannelError('CHANNEL_UNAVAILABLE', `${failed} Discord channel(s) could not be read (or their archived threads listed) by the catch-up`);
  return { newestMs, delivered };
}
