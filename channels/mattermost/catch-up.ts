import type { Logger } from 'pino';
import { ChannelError } from '../../src/contracts/errors.js';
import { MattermostAnswerTooLarge } from './errors.js';
import type { MmPost } from './normalize.js';

/** The most posts a catch-up page asks for: the server's per_page maximum. */
const CATCH_UP_PAGE = 200;
/**
 * Posts in a row whose answer alone is over the bound before a walk gives up on its channel:
 * each costs a request cut at the bound, and a server (or proxy) answering every page over it
 * would otherwise be asked forever.
 */
const MAX_SKIPPED_IN_A_ROW = 16;

/**
 * A page of `GET /channels/{id}/posts`: `order` holds the page's own posts (newest first),
 * `posts` those and the roots of their threads; the cursors name the posts just beyond the page.
 */
export interface MmPostList {
  order?: string[];
  posts?: Record<string, MmPost>;
  next_post_id?: string;
  prev_post_id?: string;
}

/** Reads `GET /channels/{channelId}/posts?{query}`; rejects with the classified error (errors.ts). */
export type ReadPosts = (channelId: string, query: string, signal: AbortSignal) => Promise<MmPostList>;

export interface CatchUpChannelOptions {
  read: ReadPosts;
  channelId: string;
  /** Posts created at or after this server time are delivered. */
  sinceMs: number;
  /** Ids already skipped (and warned about) in this catch-up: a second walk does not warn again. */
  skipped: Set<string>;
  log: Logger;
  /** The channeld channel's id, for log lines. */
  channel: string;
  signal: AbortSignal;
}

/** What a channel's catch-up read: the newest create time delivered, and whether its newest post was skipped. */
export interface ChannelCaughtUp {
  newestMs: number;
  skippedNewest: boolean;
}

/** Whether `err` is an answer over rest.ts's bound, which a smaller page may avoid. */
function tooLarge(err: unknown): boolean {
  return err instanceof ChannelError && err.cause instanceof MattermostAnswerTooLarge;
}

/**
 * A walk through one channel's posts, a page at a time, from `anchor` (a post id; none: the
 * newest post) to older posts (`before`) or newer ones (`after`), as the server pages them
 * (`before`/`after`, `per_page`, `page`; `since` ignores `per_page`). A page whose answer is
 * over the bound is asked again at half the size, down to one post; a post too large on its
 * own is skipped with a warning naming it, and the walk goes on from it (the server takes an
 * anchor by id, unread). Every page starts at the full size again.
 */
class PostWalk {
  /** Nothing more in this direction (as of the last page; later posts come over the socket). */
  done = false;
  /** The channel's newest post was skipped: no post read tells how far the walk went. */
  skippedNewest = false;
  /** The post just behind the last page's first one (towards the anchor), as its cursor named it. */
  behindFirst: string | undefined;
  #anchor: string | undefined;
  /** The post just beyond the anchor, as the last page's cursor named it. */
  #beyond: string | undefined;
  /** The last step skipped a post: an empty page next means it was the newest (walking forwards). */
  #justSkipped = false;

  constructor(
    private readonly o: CatchUpChannelOptions,
    private readonly direction: 'before' | 'after',
    anchor?: string,
    beyond?: string,
  ) {
    this.#anchor = anchor;
    this.#beyond = beyond;
  }

  /** The next page's posts, in the walk's order (away from the anchor); empty once done, or after a skip. */
  async next(): Promise<MmPost[]> {
    if (this.done) return [];
    // Skipped already in this catch-up (the other walk met it): not asked for again.
    if (this.#beyond && this.o.skipped.has(this.#beyond)) return this.#skip(this.#beyond);
    for (let perPage = CATCH_UP_PAGE; ; perPage = Math.ceil(perPage / 2)) {
      const list = await this.#read(perPage, 0);
      if (list) return this.#took(list, perPage);
      if (perPage > 1) continue;
      // One post over the bound alone: the last page's cursor names it, else its neighbour's does.
      return this.#beyond ? this.#skip(this.#beyond) : this.#stepOver();
    }
  }

  /** One page, or undefined when its answer is over the bound. */
  async #read(perPage: number, page: number): Promise<MmPostList | undefined> {
    const anchor = this.#anchor ? `${this.direction}=${encodeURIComponent(this.#anchor)}&` : '';
    try {
      // skipFetchThreads: the page's posts and their roots, not their whole threads.
      return await this.o.read(this.o.channelId, `${anchor}page=${page}&per_page=${perPage}&skipFetchThreads=true`, this.o.signal);
    } catch (err) {
      if (tooLarge(err)) return undefined;
      throw err;
    }
  }

  /** The page's own posts (by `order`: `posts` holds thread roots too) in walk order; the anchor moves to the last. */
  #took(list: MmPostList, perPage: number): MmPost[] {
    const order = list.order ?? [];
    const posts = order.map((id) => list.posts?.[id]).filter((p): p is MmPost => p !== undefined);
    posts.sort((a, b) => (this.direction === 'after' ? a.create_at - b.create_at : b.create_at - a.create_at));
    const last = posts.at(-1);
    // Fewer posts than asked: the walk has reached the end (or the server did not move it on).
    if (order.length < perPage || !last || last.id === this.#anchor) this.done = true;
    if (last) this.#anchor = last.id;
    else if (this.#justSkipped && this.direction === 'after') this.skippedNewest = true;
    this.#justSkipped = false;
    const [towards, away] = this.direction === 'after' ? [list.prev_post_id, list.next_post_id] : [list.next_post_id, list.prev_post_id];
    this.#beyond = away || undefined;
    if (last) this.behindFirst = towards || undefined;
    return posts;
  }

  /** Walks on from `id`, a post too large to read, without reading it. */
  #skip(id: string): MmPost[] {
    this.#warn(1, [id]);
    this.#anchor = id;
    this.#beyond = undefined;
    this.#justSkipped = true;
    return [];
  }

  /**
   * The post next to the anchor is over the bound alone and no cursor named it: read the posts
   * beyond it by offset from the same anchor (`page`) until one fits or none is left, and skip
   * those between; the fitting post's cursor names the last of them.
   */
  async #stepOver(): Promise<MmPost[]> {
    const fromNewest = this.direction === 'before' && this.#anchor === undefined;
    for (let offset = 1; offset <= MAX_SKIPPED_IN_A_ROW; offset++) {
      const list = await this.#read(1, offset);
      if (!list) continue;
      const fits = (list.order?.length ?? 0) > 0;
      this.#warn(offset, [fits ? (this.direction === 'after' ? list.prev_post_id : list.next_post_id) || undefined : undefined]);
      this.skippedNewest ||= fromNewest || (this.direction === 'after' && !fits);
      if (fits) return this.#took(list, 1);
      this.done = true;
      return [];
    }
    this.o.log.error(
      { channel: this.o.channel, mattermostChannel: this.o.channelId, [this.direction]: this.#anchor ?? 'the newest post', posts: MAX_SKIPPED_IN_A_ROW },
      "every Mattermost post read past this one is over the answer bound alone; this channel's catch-up stops here",
    );
    this.done = true;
    this.skippedNewest ||= this.direction === 'after' || fromNewest;
    return [];
  }

  #warn(count: number, names: Array<string | undefined>): void {
    const ids = [...new Set(names.filter((id): id is string => id !== undefined))];
    if (ids.length && ids.every((id) => this.o.skipped.has(id))) return;
    for (const id of ids) this.o.skipped.add(id);
    // Named by id where the server's cursors tell it, else by where it stands.
    this.o.log.warn(
      { channel: this.o.channel, mattermostChannel: this.o.channelId, posts: ids, count, [this.direction]: this.#anchor ?? 'the newest post' },
      'Mattermost post too large to read (its answer alone is over the bound) skipped by the catch-up',
    );
  }
}

/**
 * One channel's posts created since `sinceMs`, oldest first, through `take`. Walks back from
 * the newest post to the first one older than `sinceMs`, holding one page at a time; when that
 * took more than one page, the posts after that page are read again forwards, so no more than
 * a page is ever held (a reconnect after a short drop reads one page, as before).
 */
export async function catchUpChannel(o: CatchUpChannelOptions, take: (post: MmPost) => Promise<void>): Promise<ChannelCaughtUp> {
  let newestMs = 0;
  const deliver = async (posts: readonly MmPost[]) => {
    for (const post of posts) {
      if (post.create_at < o.sinceMs) continue;
      await take(post);
      newestMs = Math.max(newestMs, post.create_at);
    }
  };
  const back = new PostWalk(o, 'before');
  let held: MmPost[] = [];
  let heldBehind: string | undefined;
  let pages = 0;
  while (!back.done) {
    const page = await back.next();
    if (page.length) {
      held = page;
      heldBehind = back.behindFirst;
      pages++;
    }
    if (page.some((p) => p.create_at < o.sinceMs)) break;
  }
  await deliver(held.toReversed());
  let skippedNewest = back.skippedNewest;
  if (pages > 1 && held[0]) {
    // From the boundary page's newest post: the one after it is named already, skipped maybe.
    const forth = new PostWalk(o, 'after', held[0].id, heldBehind);
    while (!forth.done) await deliver(await forth.next());
    skippedNewest ||= forth.skippedNewest;
  }
  return { newestMs, skippedNewest };
}
