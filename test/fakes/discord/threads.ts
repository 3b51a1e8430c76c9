/**
 * The fake Discord's channels beyond each guild's first text channel, and its threads, as
 * Discord keeps them: a thread is active or archived (`thread_metadata.archived`, with the
 * `archive_timestamp` of its last change), public (type 11, 10 in an announcement channel)
 * or private (type 12, seen by the bot only once it joined it). server.ts holds the messages;
 * this holds what a listing of threads needs.
 */

/** Channel types that hold threads: text, announcement, forum, media. */
export const THREAD_PARENT_TYPES = [0, 5, 15, 16] as const;
export type ParentType = (typeof THREAD_PARENT_TYPES)[number];

/** What the archived-thread listings take: `limit` 1–100, 50 when not given (the docs name no bound; 100 is the usual client maximum). */
export const THREADS_PAGE_DEFAULT = 50;
export const THREADS_PAGE_MAX = 100;

export interface FakeParent {
  id: string;
  guildId: string;
  type: ParentType;
  name: string;
}

export interface FakeThread {
  id: string;
  guildId: string;
  parentId: string;
  type: 10 | 11 | 12;
  name: string;
  archived: boolean;
  /** When it was last archived or unarchived (its creation until then). */
  archivedAtMs: number;
  createdAtMs: number;
  /** Private threads: whether the bot is a member (it then sees them without MANAGE_THREADS). */
  botJoined: boolean;
}

type Answer = { status: number; body: unknown };

export class FakeThreads {
  readonly parents = new Map<string, FakeParent>();
  readonly threads = new Map<string, FakeThread>();

  /** `lastMessageId`: the newest message of a channel (server.ts's history), null when none. */
  constructor(
    readonly botId: string,
    readonly lastMessageId: (channelId: string) => string | null,
  ) {}

  addParent(p: FakeParent): void {
    this.parents.set(p.id, p);
  }

  addThread(t: Omit<FakeThread, 'archived' | 'archivedAtMs' | 'createdAtMs' | 'botJoined'> & { botJoined?: boolean; atMs?: number }): FakeThread {
    const atMs = t.atMs ?? Date.now();
    const thread: FakeThread = { ...t, archived: false, archivedAtMs: atMs, createdAtMs: atMs, botJoined: t.botJoined ?? t.type !== 12 };
    this.threads.set(thread.id, thread);
    return thread;
  }

  /** Archived by Discord after its inactivity period (or by a moderator) at `atMs`. */
  archive(threadId: string, atMs: number): FakeThread {
    const t = this.threads.get(threadId);
    if (!t) throw new Error(`no thread ${threadId}`);
    t.archived = true;
    t.archivedAtMs = atMs;
    return t;
  }

  /** A message sent in an archived (unlocked) thread unarchives it, as on Discord. */
  messagePosted(channelId: string, atMs: number): void {
    const t = this.threads.get(channelId);
    if (t?.archived) {
      t.archived = false;
      t.archivedAtMs = atMs;
    }
  }

  /** A channel of a guild of the fake's: an added parent or a thread. */
  knows(channelId: string): boolean {
    return this.parents.has(channelId) || this.threads.has(channelId);
  }

  guildOf(channelId: string): string | undefined {
    return (this.parents.get(channelId) ?? this.threads.get(channelId))?.guildId;
  }

  /** The channel type a message's `channel_type` carries. */
  typeOf(channelId: string): number | undefined {
    return (this.parents.get(channelId) ?? this.threads.get(channelId))?.type;
  }

  /** GUILD_CREATE's `channels` beyond the guild's first text channel. */
  apiParents(guildId: string): object[] {
    return [...this.parents.values()]
      .filter((p) => p.guildId === guildId)
      .map((p, i) => ({
        id: p.id,
        type: p.type,
        name: p.name,
        position: i + 1,
        guild_id: p.guildId,
        permission_overwrites: [],
        // Forum and media channels take no messages of their own: their last_message_id is the newest post (thread).
        last_message_id: p.type === 15 || p.type === 16 ? this.#newestThread(p.id) : this.lastMessageId(p.id),
      }));
  }

  /** GUILD_CREATE's `threads`: the active ones the bot can see (a private thread only once it joined). */
  apiActiveThreads(guildId: string): object[] {
    return [...this.threads.values()].filter((t) => t.guildId === guildId && !t.archived && this.#visible(t)).map((t) => this.apiThread(t));
  }

  /** A thread channel object as Discord's REST and gateway carry it. */
  apiThread(t: FakeThread): object {
    return {
      id: t.id,
      type: t.type,
      name: t.name,
      guild_id: t.guildId,
      parent_id: t.parentId,
      owner_id: '1',
      last_message_id: this.lastMessageId(t.id),
      rate_limit_per_user: 0,
      flags: 0,
      member_count: 2,
      message_count: 0,
      total_message_sent: 0,
      thread_metadata: {
        archived: t.archived,
        auto_archive_duration: 60,
        archive_timestamp: new Date(t.archivedAtMs).toISOString(),
        locked: false,
        create_timestamp: new Date(t.createdAtMs).toISOString(),
        ...(t.type === 12 ? { invitable: true } : {}),
      },
    };
  }

  /**
   * `GET /channels/{id}/threads/archived/public` (`joined`: false) and
   * `GET /channels/{id}/users/@me/threads/archived/private` (`joined`: true) as Discord
   * documents them: `{ threads, members, has_more }`, the public ones newest archived first
   * (`before`: an ISO8601 timestamp, threads archived before it), the joined private ones by id
   * descending (`before`: a thread id). A channel that holds no threads is 400 (50024).
   * Access (403) and unknown channels (404) are server.ts's to answer.
   */
  listArchived(parentId: string, joined: boolean, query: URLSearchParams): Answer {
    const parent = this.#parentType(parentId);
    if (parent === undefined) return { status: 400, body: { message: 'Cannot execute action on this channel type', code: 50024 } };
    const limit = query.has('limit') ? Number(query.get('limit')) : THREADS_PAGE_DEFAULT;
    if (!Number.isInteger(limit) || limit < 1 || limit > THREADS_PAGE_MAX)
      return { status: 400, body: { message: 'Invalid Form Body', code: 50035, errors: { limit: { _errors: [{ code: 'NUMBER_TYPE_MAX' }] } } } };
    const before = query.get('before');
    let all = [...this.threads.values()].filter((t) => t.parentId === parentId && t.archived && (joined ? t.type === 12 && t.botJoined : t.type !== 12));
    if (joined) {
      if (before && !/^\d+$/.test(before)) return { status: 400, body: { message: 'Invalid Form Body', code: 50035 } };
      all = all.filter((t) => !before || BigInt(t.id) < BigInt(before)).sort((a, b) => (BigInt(a.id) > BigInt(b.id) ? -1 : 1));
    } else {
      const beforeMs = before ? Date.parse(before) : Number.POSITIVE_INFINITY;
      if (Number.isNaN(beforeMs)) return { status: 400, body: { message: 'Invalid Form Body', code: 50035 } };
      all = all.filter((t) => t.archivedAtMs < beforeMs).sort((a, b) => b.archivedAtMs - a.archivedAtMs);
    }
    const page = all.slice(0, limit);
    return {
      status: 200,
      body: {
        threads: page.map((t) => this.apiThread(t)),
        // A thread member object for each listed thread the bot joined (`id` is the thread's).
        members: page
          .filter((t) => t.botJoined)
          .map((t) => ({ id: t.id, user_id: this.botId, join_timestamp: new Date(t.createdAtMs).toISOString(), flags: 0 })),
        has_more: all.length > limit,
      },
    };
  }

  #visible(t: FakeThread): boolean {
    return t.type !== 12 || t.botJoined;
  }

  #newestThread(parentId: string): string | null {
    const ids = [...this.threads.values()].filter((t) => t.parentId === parentId).map((t) => BigInt(t.id));
    return ids.length ? String(ids.sort((a, b) => (a < b ? 1 : -1))[0]) : null;
  }

  /** The type of a channel that holds threads; server.ts registers each guild's first text channel here too. */
  #parentType(id: string): ParentType | undefined {
    return this.parents.get(id)?.type;
  }
}
