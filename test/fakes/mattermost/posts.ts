import type { MmFakePost } from './server.js';

/**
 * GET /channels/{id}/posts as Mattermost answers it (api4/post.go getPostsForChannel, the SQL
 * store's GetPostsSince, getPostsAround and GetPosts, app's AddCursorIdsForPostList).
 * `since`: the posts updated after it, deleted ones too, at most 1,000, `page` and `per_page`
 * ignored. Else a page of `per_page` posts (60 unless given, at most 200) at offset
 * `page × per_page`: created before (`before`) or after (`after`) that post, or from the
 * newest; deleted ones left out. Before and after compare create times strictly
 * (`CreateAt < (SELECT CreateAt FROM Posts WHERE Id = before)`, `>` for after, the anchor
 * found even when deleted), so the anchor's millisecond is left out both ways; the ORDER BY
 * is CreateAt alone, and posts of one millisecond come in the index's order, here by id (as
 * MySQL's, whose secondary index ends with the primary key), reversed when descending.
 * `order` is the page, newest first (an `after` page turned round); `posts` adds the roots
 * of its replies (and, without skipFetchThreads=true, their threads); `next_post_id` and
 * `prev_post_id` name the first post created after the page's newest, before its oldest
 * (strictly again: GetPostIdAfterTime/BeforeTime), unless the anchor or a short page settles them.
 */
export function postsPage(stored: ReadonlyMap<string, MmFakePost>, channelId: string, q: URLSearchParams): Record<string, unknown> {
  const wire = (list: MmFakePost[]) => Object.fromEntries(list.map(({ edits: _e, ...x }) => [x.id, x]));
  const byTime = (a: MmFakePost, b: MmFakePost) => a.create_at - b.create_at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
  const all = [...stored.values()].filter((x) => x.channel_id === channelId).sort(byTime);
  const since = Number(q.get('since') ?? 0);
  if (since > 0) {
    const list = all.filter((x) => x.update_at > since).slice(0, 1000);
    return { order: list.map((x) => x.id).reverse(), posts: wire(list), next_post_id: '', prev_post_id: '' };
  }
  const int = (name: string, fallback: number) => {
    const v = Number.parseInt(q.get(name) ?? '', 10);
    return Number.isNaN(v) || v < 0 ? fallback : v;
  };
  const page = int('page', 0);
  const perPage = Math.min(int('per_page', 60), 200);
  const live = all.filter((x) => !x.delete_at);
  const after = q.get('after') ?? '';
  const before = q.get('before') ?? '';
  const anchorAt = stored.get(after || before)?.create_at;
  let candidates: MmFakePost[];
  if (after) candidates = anchorAt === undefined ? [] : live.filter((x) => x.create_at > anchorAt);
  else if (before) candidates = anchorAt === undefined ? [] : live.filter((x) => x.create_at < anchorAt).reverse();
  else candidates = [...live].reverse();
  const selected = candidates.slice(page * perPage, (page + 1) * perPage);
  const list = after ? selected.toReversed() : selected;
  const roots = new Set(list.flatMap((x) => [x.id, x.root_id].filter(Boolean)));
  const threads = q.get('skipFetchThreads') === 'true' ? [] : live.filter((x) => roots.has(x.root_id));
  const parents = [...live.filter((x) => roots.has(x.id)), ...threads];
  const newest = list[0];
  const oldest = list.at(-1);
  const nextId = () => (newest ? (live.find((x) => x.create_at > newest.create_at)?.id ?? '') : '');
  const prevId = () => (oldest ? (live.findLast((x) => x.create_at < oldest.create_at)?.id ?? '') : '');
  const short = list.length < perPage;
  let next: string;
  let prev: string;
  if (after) {
    prev = page === 0 ? after : prevId();
    next = short ? '' : nextId();
  } else if (before) {
    next = page === 0 ? before : nextId();
    prev = short ? '' : prevId();
  } else {
    next = nextId();
    prev = prevId();
  }
  return { order: list.map((x) => x.id), posts: wire([...parents, ...list]), next_post_id: next, prev_post_id: prev };
}
