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
/** Skips a walk keeps to log later: the walk back logs them only when its page is the one delivered (two runs of skips at most). */
const MAX_UNWARNED = 2 * MAX_SKIPPED_IN_A_ROW;
const TOO_LARGE = 'Mattermost post too large to read (its answer alone is over the bound) skipped by the catch-up';

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
  log: Logger;
  /** The channeld channel's id, for log lines. */
  channel: string;
  signal: AbortSignal;
}

/** What a channel's catch-up read: the newest create time delivered, whether its newest post was skipped, how many were. */
export interface ChannelCaughtUp {
  newestMs: number;
  skippedNewest: boolean;
  skipped: number;
}

/** Whether `err` is an answer over rest.ts's bound, which a smaller page may avoid. */
function tooLarge(err: unknown): boolean {
  return err instanceof ChannelError && err.cause instanceof MattermostAnswerTooLarge;
}

/** The largest page size up to `wantPosts` that `offset` is a multiple of: the server starts a page at `page` × `per_page`. */
function pageSizeAt(offset: number, wantPosts: number): number {
  for (let n = wantPosts; n > 1; n--) if (offset % n === 0) return n;
  return 1;
}

/**
 * A walk through one channel's posts, a page at a time, from `anchor` (a post id; none: the
 * newest post) to older posts (`before`) or newer ones (`after`).
 *
 * The server pages around a post by create time, strictly (post_store.go getPostsAround:
 * `CreateAt < (SELECT CreateAt … WHERE Id = before)`, `>` for after, ordered by CreateAt alone),
 * so a page anchored on a post leaves out every other post of that post's millisecond. The walk
 * therefore anchors on the last post read before the latest millisecond read, whose own
 * millisecond is wholly behind: the next page starts with the latest millisecond's posts again,
 * and those read already (`#edge`) are dropped. A page all of one millisecond leaves the anchor
 * and moves the offset on (`page` × `per_page`), so a millisecond longer than a page is read
 * through. A page whose answer is over the bound is asked again at half the size, down to one
 * post; a post too large on its own is skipped (the offset passes it) with a warning saying
 * where it stands. Every page from a new anchor starts at the full size again.
 */
class PostWalk {
  /** Nothing more in this direction (as of the last page; later posts come over the socket). */
  done = false;
  /** The channel's newest post was skipped: no post read tells how far the walk went. */
  skippedNewest = false;
  /** Posts skipped as too large alone. */
  skipped = 0;
  /** Skips not logged (a walk made with `warn` false): the caller logs them if it delivers this walk's page. */
  readonly unwarned: Array<Record<string, unknown>> = [];
  /** The last post read, in the walk's order. */
  last: MmPost | undefined;
  #anchor: string | undefined;
  /** Posts passed from the anchor: the next page starts here. */
  #offset = 0;
  /** The ids read of the latest millisecond since the anchor moved: the next page repeats them. */
  #edge = new Set<string>();
  #skippedLast = false;
  #inARow = 0;

  constructor(
    private readonly o: CatchUpChannelOptions,
    private readonly direction: 'before' | 'after',
    anchor?: string,
    private readonly warn = true,
  ) {
    this.#anchor = anchor;
  }

  /** The post the walk reads on from (none: the newest), just before the latest millisecond read. */
  get anchor(): string | undefined {
    return this.#anchor;
  }

  /** The next page's new posts, in the walk's order; empty once done, or after a skip. */
  async next(): Promise<MmPost[]> {
    if (this.done) return [];
    for (let want = CATCH_UP_PAGE; ; ) {
      const perPage = pageSizeAt(this.#offset, want);
      const list = await this.#read(perPage);
      if (list) return this.#took(list, perPage);
      if (perPage === 1) return this.#skip();
      want = Math.ceil(perPage / 2);
    }
  }

  /** One page, or undefined when its answer is over the bound. */
  async #read(perPage: number): Promise<MmPostList | undefined> {
    const anchor = this.#anchor ? `${this.direction}=${encodeURIComponent(this.#anchor)}&` : '';
    const page = this.#offset / perPage;
    try {
      // skipFetchThreads: the page's posts and their roots, not their whole threads.
      return await this.o.read(this.o.channelId, `${anchor}page=${page}&per_page=${perPage}&skipFetchThreads=true`, this.o.signal);
    } catch (err) {
      if (tooLarge(err)) return undefined;
      throw err;
    }
  }

  /** The page's own posts (by `order`: `posts` holds thread roots too) in walk order, less those read already. */
  #took(list: MmPostList, perPage: number): MmPost[] {
    // `order` is newest first both ways (the server turns an `after` page round): reversed
    // forwards, so posts of one millisecond keep the server's order.
    const order = this.direction === 'after' ? (list.order ?? []).toReversed() : (list.order ?? []);
    const posts = order.map((id) => list.posts?.[id]).filter((p): p is MmPost => p !== undefined);
    posts.sort((a, b) => (this.direction === 'after' ? a.create_at - b.create_at : b.create_at - a.create_at));
    const last = posts.at(-1);
    if (!last) {
      this.done = true;
      // Forwards, a skip and then nothing: the skipped post was the newest.
      this.skippedNewest ||= this.#skippedLast && this.direction === 'after';
      return [];
    }
    this.#skippedLast = false;
    this.#inARow = 0;
    const fresh = posts.filter((p) => !this.#edge.has(p.id));
    const read = this.last ? [this.last, ...posts] : posts;
    const behind = read.findLast((p) => p.create_at !== last.create_at);
    if (behind && behind.id !== this.#anchor) {
      this.#anchor = behind.id;
      this.#offset = 0;
      this.#edge = new Set(read.slice(read.indexOf(behind) + 1).map((p) => p.id));
    } else {
      // A page that ends where the last one did: the server did not move on, and would not.
      if (this.#offset > 0 && last.id === this.last?.id) this.done = true;
      this.#offset += perPage;
    }
    this.last = last;
    // Fewer posts than asked: the walk has reached the end.
    if ((list.order?.length ?? 0) < perPage) this.done = true;
    return fresh;
  }

  /** Walks on past the post at the offset, too large to read alone, without reading it. */
  #skip(): MmPost[] {
    if (this.direction === 'before' && !this.#anchor && this.#offset === 0) this.skippedNewest = true;
    this.#offset++;
    this.#inARow++;
    this.skipped++;
    this.#skippedLast = true;
    // Named by where it stands: the server's cursors go by create time, so with posts sharing
    // a millisecond they may name another post.
    const where = {
      channel: this.o.channel,
      mattermostChannel: this.o.channelId,
      [this.direction]: this.last?.id ?? this.#anchor ?? 'the newest post',
      inARow: this.#inARow,
    };
    if (this.warn) this.o.log.warn(where, TOO_LARGE);
    else if (this.unwarned.length < MAX_UNWARNED) this.unwarned.push(where);
    if (this.#inARow >= MAX_SKIPPED_IN_A_ROW) {
      this.o.log.error(
        { ...where, posts: MAX_SKIPPED_IN_A_ROW },
        "every Mattermost post read past this one is over the answer bound alone; this channel's catch-up stops here",
      );
      this.done = true;
      // Forwards: the newest posts are among those never read; the cursor passes them.
      this.skippedNewest ||= this.direction === 'after';
    }
    return [];
  }
}

/**
 * One channel's posts created since `sinceMs`, oldest first, through `take`, holding one page
 * at a time. Walks back from the newest post to a page holding one older than `sinceMs`: when
 * that was the first page, it holds them all (a reconnect after a short drop reads one page).
 * Else forwards from the last post read (older than `sinceMs`, its millisecond too); when the
 * walk back reached the channel's first post (or gave up) without passing `sinceMs`, that
 * post's millisecond is read back first, as forwards leaves it out. No post comes twice.
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
  // Its skips are warned about by whichever walk delivers their posts.
  const back = new PostWalk(o, 'before', undefined, false);
  let first: MmPost[] = [];
  let pages = 0;
  while (!back.done) {
    const page = await back.next();
    if (page.length) first = ++pages === 1 ? page : [];
    if (page.some((p) => p.create_at < o.sinceMs)) break;
  }
  if (pages <= 1) {
    for (const where of back.unwarned) o.log.warn(where, TOO_LARGE);
    await deliver(first.toReversed());
    return { newestMs, skippedNewest: back.skippedNewest, skipped: back.skipped };
  }
  const last = back.last!;
  let skipped = 0;
  if (last.create_at >= o.sinceMs) {
    // Its millisecond may begin pages before it: back from the post just before that millisecond, up to it.
    const run = new PostWalk(o, 'before', back.anchor);
    while (!run.done) {
      const page = await run.next();
      await deliver(page.filter((p) => p.create_at === last.create_at).toReversed());
      if (page.some((p) => p.id === last.id || p.create_at < last.create_at)) break;
    }
    skipped += run.skipped;
  }
  const forth = new PostWalk(o, 'after', last.id);
  while (!forth.done) await deliver(await forth.next());
  return { newestMs, skippedNewest: forth.skippedNewest, skipped: skipped + forth.skipped };
}
