import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { readChannelList } from '../../../channels/mattermost/channel-list.js';
import { MattermostAnswerTooLarge } from '../../../channels/mattermost/errors.js';
import type { MmFakePost } from '../../fakes/mattermost/server.js';
import { waitFor } from '../../helpers/daemon.js';
import { catchUpFixture } from './mattermost-fixture.js';

const DAY_MS = 24 * 60 * 60 * 1000;
/** The bound rest.ts reads an answer within (its MAX_ANSWER_BYTES), which the fix keeps. */
const MAX_ANSWER_BYTES = 8 * 1024 * 1024;
/** Props the size of a large integration post's attachments. */
const props = (bytes: number) => ({ attachments: [{ text: 'x'.repeat(bytes) }] });

/**
 * The REST catch-up reads a channel a page at a time within the 8 MiB answer bound: a page over
 * it is asked for again smaller rather than parking the channel, and a post too large alone is
 * skipped with a warning naming it.
 */
describe('Mattermost: catch-up pages over the answer bound', () => {
  const f = catchUpFixture('channeld-mm-pages-');
  /** The catch-up finished, or the listener ended (before the fix: parked by a non-retryable error). */
  const caughtUp = async () => {
    await f.untilCaughtUp();
    expect(f.ended?.err).toBeUndefined();
  };
  /** The catch-up's reads of posts: where from (posts by name), how many, and the offset when not 0. */
  const reads = (names: Record<string, MmFakePost>) => {
    const name = (id: string | null) => Object.entries(names).find(([, p]) => p.id === id)?.[0] ?? id;
    return f.mm.callsOf('since').map(({ query: q }) => {
      const from = q.has('before') ? `before ${name(q.get('before'))}` : q.has('after') ? `after ${name(q.get('after'))}` : 'newest';
      return `${from} ${q.get('per_page')}${q.get('page') === '0' ? '' : ` page ${q.get('page')}`}`;
    });
  };
  const halving = (from: string) => ['200', '100', '50', '25', '13', '7', '4', '2', '1'].map((n) => `${from} ${n}`);
  const cursorIs = (post: MmFakePost) => waitFor(async () => (await readFile(f.cursorFile, 'utf8')) === `${post.create_at}\n`);

  it('a page over 8 MiB is asked for again at half the size until it fits; the next page is full size; every post comes once, in order', async () => {
    const old = f.mm.userPost('before the cursor');
    const posts = Array.from({ length: 40 }, (_, i) => f.mm.userPost(`long ${i}`, { props: props(300_000) }));
    // 40 posts of 300 kB: more than the bound in one answer, 25 of them fit.
    expect(40 * 300_000).toBeGreaterThan(MAX_ANSWER_BYTES);
    expect(25 * 300_500).toBeLessThan(MAX_ANSWER_BYTES);
    f.listen(old.create_at + 1);
    await caughtUp();

    expect(f.delivered.map((m) => m.messageId)).toEqual(posts.map((p) => p.id));
    // Back from the newest: 200, 100, 50 over the bound, 25 fit; the next page, from the post
    // before the last one read (whose millisecond is wholly read), asks 200 again and reaches
    // the cursor. Forwards from the last post read, halved the same way, then 200 again.
    expect(reads({ old, p16: posts[16]!, p23: posts[23]! })).toEqual([
      ...['newest 200', 'newest 100', 'newest 50', 'newest 25', 'before p16 200'],
      ...['after old 200', 'after old 100', 'after old 50', 'after old 25', 'after p23 200'],
    ]);
    expect(f.lines.filter((l) => l.level >= 40)).toEqual([]);
    await cursorIs(posts.at(-1)!);
    // Still listening: the next post comes over the socket.
    const live = f.mm.userPost('live');
    await waitFor(() => f.delivered.at(-1)?.messageId === live.id);
  });

  it('a post whose answer alone is over 8 MiB is skipped with a warning saying where it stands; the posts around it come, in order', async () => {
    const old = f.mm.userPost('before the cursor');
    const a = f.mm.userPost('a');
    const huge = f.mm.userPost('huge', { props: props(MAX_ANSWER_BYTES + 1) });
    const b = f.mm.userPost('b');
    f.listen(old.create_at + 1);
    await caughtUp();

    expect(f.delivered.map((m) => m.messageId)).toEqual([a.id, b.id]);
    // Once, by where it stands (the server's cursors go by create time, and may name another
    // post of its millisecond): the walk back does not warn, as the walk forwards passes it too.
    const warned = f.lines.filter((l) => l.level === 40);
    expect(warned).toEqual([
      expect.objectContaining({ msg: 'Mattermost post too large to read (its answer alone is over the bound) skipped by the catch-up', after: a.id }),
    ]);
    expect(f.lines.find((l) => l.msg === 'Mattermost catch-up delivered missed posts')).toMatchObject({ posts: 2, skipped: 1 });
    // Back: b alone fits; the post after it is over the bound alone and the offset passes it;
    // the next page (by offset from the same place) reaches the cursor. Forwards from old: a
    // alone fits, the offset passes huge, and b ends the channel.
    expect(reads({ a, b, huge, old })).toEqual([
      ...[...halving('newest'), 'newest 1 page 1', 'newest 2 page 1'],
      ...[...halving('after old'), 'after old 1 page 1', 'after old 2 page 1'],
    ]);
    await cursorIs(b);
  });

  it("a channel's newest post too large alone is skipped, and the cursor moves past it", async () => {
    const old = f.mm.userPost('before the cursor');
    const a = f.mm.userPost('a');
    const huge = f.mm.userPost('huge', { props: props(MAX_ANSWER_BYTES + 1) });
    f.listen(old.create_at + 1);
    await caughtUp();

    expect(f.delivered.map((m) => m.messageId)).toEqual([a.id]);
    expect(f.lines.filter((l) => l.level === 40)).toEqual([expect.objectContaining({ after: a.id })]);
    // The next catch-up starts after it: the post is not read (and warned about) again.
    // The newest alone is over the bound: the offset passes it. Forwards, after a nothing.
    expect(reads({ a, old, huge })).toEqual([
      ...halving('newest'),
      'newest 1 page 1',
      'newest 2 page 1',
      ...halving('after old'),
      'after old 1 page 1',
      'after old 2 page 1',
    ]);
    await cursorIs(huge);
  });
});

/**
 * Mattermost pages around a post by create time, strictly: before=X leaves out every post of X's
 * millisecond, and so does after=X. Busy servers (bots, integrations, imports) put several posts
 * in one millisecond; the catch-up must not lose those at a page's edge.
 */
describe('Mattermost: catch-up pages with posts sharing a millisecond', () => {
  const f = catchUpFixture('channeld-mm-ties-');
  /** A restart from `cursorMs`; resolves once the catch-up has logged what it delivered. */
  const catchUp = async (cursorMs: number) => {
    f.listen(cursorMs);
    await f.untilCaughtUp();
    expect(f.ended).toBeUndefined();
  };
  /** Every post once, oldest first (posts of one millisecond in any order among themselves). */
  const expectAllOnceInOrder = (posts: MmFakePost[]) => {
    const ids = f.delivered.map((m) => m.messageId);
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(posts.map((p) => p.id).sort());
    const at = new Map(posts.map((p) => [p.id, p.create_at]));
    const times = ids.map((id) => at.get(id)!);
    expect(times).toEqual(times.toSorted((a, b) => a - b));
    expect(f.lines.find((l) => l.msg === 'Mattermost catch-up delivered missed posts')).toMatchObject({ posts: posts.length });
    expect(f.lines.filter((l) => l.level >= 40)).toEqual([]);
  };
  const cursorIs = (ms: number) => waitFor(async () => (await readFile(f.cursorFile, 'utf8')) === `${ms}\n`);

  it('450 posts three to a millisecond: the posts sharing a page edge’s millisecond all come, in order, once each', async () => {
    const baseMs = Date.now() - 60_000;
    f.mm.userPost('before the cursor', { createAt: baseMs - 10 });
    // Pages of 200 end inside a millisecond (200 and 400 are not multiples of 3), both ways.
    const posts = Array.from({ length: 450 }, (_, i) => f.mm.userPost(`post ${i}`, { createAt: baseMs + Math.floor(i / 3) }));
    await catchUp(baseMs);
    expectAllOnceInOrder(posts);
    await cursorIs(baseMs + 149);
  });

  it('a channel whose first 250 posts share one millisecond and the next 150 another: every post comes, in order, once each', async () => {
    const baseMs = Date.now() - 60_000;
    // Nothing before the cursor: the walk back reaches the channel's first post, inside a
    // millisecond longer than a page.
    const posts = Array.from({ length: 400 }, (_, i) => f.mm.userPost(`post ${i}`, { createAt: i < 250 ? baseMs : baseMs + 1 }));
    await catchUp(baseMs);
    expectAllOnceInOrder(posts);
    await cursorIs(baseMs + 1);
  });
});

/**
 * The catch-up finds the channels with posts since the cursor in the bot's channel list, which
 * the server does not page: a bot anyone can DM is in one channel per person who did, and past
 * some 15,000 of them the list is over the 8 MiB an answer is read within. It is read as it
 * streams instead, one channel at a time.
 */
describe('Mattermost: catch-up with a channel list over the answer bound', () => {
  const f = catchUpFixture('channeld-mm-list-');
  const caughtUp = async (times = 1) => {
    await waitFor(() => f.ended || f.lines.filter((l) => l.msg === 'Mattermost catch-up delivered missed posts').length >= times, 20_000);
    expect(f.ended?.err).toBeUndefined();
  };
  const cursorIs = (post: MmFakePost) => waitFor(async () => (await readFile(f.cursorFile, 'utf8')) === `${post.create_at}\n`);
  it('with 20,000 DMs (a list over 8 MiB), a post sent while away in one of them is caught up; the list is read once', async () => {
    const crowd = f.mm.addChannels(20_000);
    const old = f.mm.userPost('before the cursor');
    const away = f.mm.userPost('sent while away', { channel: crowd[12_345] });
    f.listen(old.create_at + 1);
    await caughtUp();

    expect(f.mm.channelListBytes).toBeGreaterThan(MAX_ANSWER_BYTES);
    expect(f.delivered.map((m) => [m.messageId, m.chat.id, m.text])).toEqual([[away.id, crowd[12_345]!.id, 'sent while away']]);
    // Every team's channels and the DMs in one list, streamed by the server; only the channel
    // with a post since the cursor is read (one page, short: the channel's only post).
    expect(f.mm.callsOf('myChannels')).toHaveLength(1);
    expect(f.mm.callsOf('channels')).toHaveLength(0);
    expect(f.mm.callsOf('since')).toHaveLength(1);
    expect(f.lines.filter((l) => l.level >= 40)).toEqual([]);
    await cursorIs(away);
  });

  it("a server without GET /users/me/channels (before 6.1): each team's list, over 8 MiB too, is read as it streams; said once", async () => {
    f.mm.absent.add('myChannels');
    const crowd = f.mm.addChannels(20_000);
    const old = f.mm.userPost('before the cursor');
    const away = f.mm.userPost('sent while away', { channel: crowd[7] });
    f.listen(old.create_at + 1);
    await caughtUp();
    expect(f.mm.channelListBytes).toBeGreaterThan(MAX_ANSWER_BYTES);
    expect(f.delivered.map((m) => m.messageId)).toEqual([away.id]);

    // A reconnect's catch-up goes to the team lists straight away.
    await waitFor(() => f.mm.connected);
    f.mm.drop();
    const again = f.mm.userPost('sent while away again', { channel: crowd[19_999] });
    await caughtUp(2);
    // The catch-up starts at the cursor, the last post stored: that one comes again (the inbox drops it).
    expect(f.delivered.map((m) => m.messageId)).toEqual([away.id, away.id, again.id]);
    expect(f.mm.callsOf('myChannels')).toHaveLength(1);
    expect(f.mm.callsOf('channels')).toHaveLength(2);
    expect(f.lines.filter((l) => l.msg.includes('no GET /users/me/channels'))).toEqual([expect.objectContaining({ level: 30, status: 404 })]);
    await cursorIs(again);
  });

  it('a list the server cuts off with its error half-way is no list: nothing is delivered, the cursor stays, and the retry catches up', async () => {
    const crowd = f.mm.addChannels(1_000);
    const old = f.mm.userPost('before the cursor');
    const away = f.mm.userPost('sent while away', { channel: crowd.at(-1) });
    f.mm.fail('myChannels', { cutAfter: 500 });
    f.listen(old.create_at + 1);
    await waitFor(() => f.ended);
    // The server's AppError, written straight after the last channel it sent, sorted as any.
    expect(f.ended!.err).toMatchObject({ code: 'CHANNEL_UNAVAILABLE', retryable: true });
    expect(String(f.ended!.err)).toMatch(/HTTP 500 app\.channel\.get_channels\.get\.app_error: Unable to get the channels\./);
    expect(f.delivered).toEqual([]);
    expect(await readFile(f.cursorFile, 'utf8')).toBe(`${old.create_at + 1}\n`);

    // What the supervisor does with a retryable failure: the listener starts again.
    f.ended = undefined;
    f.listen(old.create_at + 1);
    await caughtUp();
    expect(f.delivered.map((m) => m.messageId)).toEqual([away.id]);
  });

  it('a channel larger than 1 MiB in the list (no Mattermost channel is): the catch-up is skipped with an error naming the bound; the socket goes on; the cursor stays until a catch-up reads the list', async () => {
    const [big] = f.mm.addChannels(1, { type: 'O', header: 'x'.repeat(2 * 1024 * 1024) });
    const old = f.mm.userPost('before the cursor');
    const away = f.mm.userPost('sent while away', { channel: f.mm.town });
    f.listen(old.create_at + 1);
    const live = await f.afterCatchUp();
    const errors = () => f.lines.filter((l) => l.level >= 50);
    expect(errors()).toEqual([expect.objectContaining({ bound: 'HTTP 200: a channel in the list larger than 1048576 bytes' })]);
    // A reconnect tries again, and skips again.
    f.mm.drop();
    await waitFor(() => f.ended || errors().length === 2);
    const live2 = f.mm.userPost('live again');
    await waitFor(() => f.ended || f.delivered.some((m) => m.messageId === live2.id));
    expect(f.ended).toBeUndefined();
    expect(f.delivered.map((m) => m.messageId)).toEqual([live.id, live2.id]);
    // Stopped (the cursor file flushed): it did not pass the posts not caught up.
    f.stop.abort();
    await f.listening;
    expect(await readFile(f.cursorFile, 'utf8')).toBe(`${old.create_at + 1}\n`);

    // Once the list can be read, a restart catches up from there (the inbox drops what it has).
    f.mm.added.get(big!.id)!.header = '';
    f.stop = new AbortController();
    f.ended = undefined;
    f.delivered = [];
    f.listen(old.create_at + 1);
    await caughtUp(1);
    expect(f.delivered.map((m) => m.messageId)).toEqual([live.id, live2.id, away.id]);
    await cursorIs(live2);
  });

  it('a cursor held in the process past a day (the list over its bound all along) is a day back at most when the list can be read again', async () => {
    const [big] = f.mm.addChannels(1, { type: 'O', header: 'x'.repeat(2 * 1024 * 1024) });
    const old = f.mm.userPost('before the cursor');
    // Two days old once the server's clock moves on: past the day a catch-up reads back.
    f.mm.userPost('sent while away', { channel: f.mm.town });
    f.listen(old.create_at + 1);
    const live = await f.afterCatchUp();
    // Two days on (the server's clock: its Date headers and the posts it stamps), the list can be
    // read again, and the socket drops.
    f.mm.clockOffsetMs = 2 * DAY_MS;
    f.mm.added.get(big!.id)!.header = '';
    f.mm.drop();
    // Half a day before the server's now, with no socket open: only the catch-up can bring it.
    const recent = f.mm.userPost('half a day old', { channel: f.mm.offTopic, createAt: Date.now() + f.mm.clockOffsetMs - DAY_MS / 2 });
    // In a DM opened once the list was read: only the socket brings it, once the catch-up is done.
    await waitFor(() => f.ended || f.mm.callsOf('myChannels').length >= 2);
    const after = f.mm.userPost('live after', { channel: f.mm.addChannels(1)[0] });
    await waitFor(() => f.ended || f.delivered.some((m) => m.messageId === after.id));
    expect(f.ended).toBeUndefined();
    // Before, the held cursor read everything since it: a post two days old was answered. A floor
    // with no day back (or no catch-up) would miss the post of half a day ago.
    expect(f.delivered.map((m) => m.messageId)).toEqual([live.id, recent.id, after.id]);
    // The cursor is at the newest post, not ahead of the posts it passed.
    f.stop.abort();
    await f.listening;
    expect(await readFile(f.cursorFile, 'utf8')).toBe(`${after.create_at}\n`);
  });

  it("an AppError in the list (answered 200) naming status_code 404 is the list's failure, not a server without GET /users/me/channels: no team lists, and the catch-up fails to be retried", async () => {
    const crowd = f.mm.addChannels(150);
    const old = f.mm.userPost('before the cursor');
    const away = f.mm.userPost('sent while away', { channel: crowd.at(-1) });
    // "[", a page of 100 channels, then the AppError straight after the last one.
    f.mm.fail('myChannels', { cutAfter: 100, error: { id: 'x', message: 'Not found.', status_code: 404 } });
    f.listen(old.create_at + 1);
    await waitFor(() => f.ended || f.mm.callsOf('channels').length > 0);
    expect(f.mm.callsOf('channels')).toEqual([]);
    expect(f.lines.filter((l) => l.msg.includes('no GET /users/me/channels'))).toEqual([]);
    expect(f.ended!.err).toMatchObject({ code: 'CHANNEL_UNAVAILABLE', retryable: true });
    expect(f.delivered).toEqual([]);

    // The retry reads the list whole, still from GET /users/me/channels.
    f.ended = undefined;
    f.listen(old.create_at + 1);
    await caughtUp();
    expect(f.delivered.map((m) => m.messageId)).toEqual([away.id]);
    expect(f.mm.callsOf('myChannels')).toHaveLength(2);
    expect(f.mm.callsOf('channels')).toEqual([]);
  });

  it('a bot in no channel: the server writes "[" then its not-found (status 200, no "]"); the catch-up finds nothing and the listener goes on', async () => {
    f.mm.leave(f.mm.dm, f.mm.town, f.mm.offTopic);
    f.listen(Date.now() - 60_000);
    // Someone opens a DM with the bot meanwhile: their post comes over the socket.
    const live = await f.afterCatchUp('myChannels', () => f.mm.addChannels(1)[0]!);
    expect(f.delivered.map((m) => m.messageId)).toEqual([live.id]);
    expect(f.mm.callsOf('myChannels')).toHaveLength(1);
    expect(f.lines.filter((l) => l.level >= 40)).toEqual([]);
  });

  it("a bot in no channel of its team, on a server without GET /users/me/channels: the team's list answers its not-found as a 404; the catch-up goes on", async () => {
    f.mm.absent.add('myChannels');
    f.mm.leave(f.mm.dm, f.mm.town, f.mm.offTopic);
    f.listen(Date.now() - 60_000);
    const live = await f.afterCatchUp('channels', () => f.mm.addChannels(1)[0]!);
    expect(f.delivered.map((m) => m.messageId)).toEqual([live.id]);
    expect(f.mm.callsOf('channels')).toHaveLength(1);
    expect(f.lines.filter((l) => l.level >= 40)).toEqual([]);
  });

  it('a channel archived while the bot was away: the posts made in it before are caught up; the lists ask for channels archived since the cursor', async () => {
    const [gone, room] = f.mm.addChannels(2, { type: 'O' });
    f.mm.userPost('in a channel archived before the cursor', { channel: gone });
    const old = f.mm.userPost('before the cursor');
    f.mm.archive(gone!, old.create_at);
    const cursorMs = old.create_at + 1;
    const away = f.mm.userPost('sent while away', { channel: room });
    f.mm.archive(room!, away.create_at + 1);
    f.listen(cursorMs);
    const live = await f.afterCatchUp();
    expect(f.delivered.map((m) => m.messageId)).toEqual([away.id, live.id]);
    expect(f.mm.callsOf('myChannels').map((c) => Object.fromEntries(c.query))).toEqual([{ include_deleted: 'true', last_delete_at: String(cursorMs) }]);
    expect(f.lines.filter((l) => l.level >= 40)).toEqual([]);

    // The fake lists them as the server does: archived only with include_deleted, since last_delete_at.
    const listed = async (query: string) => {
      const ids: string[] = [];
      await readChannelList({ url: f.mm.url, token: f.mm.token }, `users/me/channels${query}`, (c) => ids.push(c.id), f.stop.signal);
      return [gone!.id, room!.id].filter((id) => ids.includes(id));
    };
    expect(await listed('')).toEqual([]);
    expect(await listed(`?include_deleted=true&last_delete_at=${cursorMs}`)).toEqual([room!.id]);
    expect(await listed('?include_deleted=true')).toEqual([gone!.id, room!.id]);
  });

  it("an archived channel on a server that shows no archived channel's posts (ExperimentalViewArchivedChannels off) is skipped with a warning; the rest is caught up", async () => {
    f.mm.viewArchivedChannels = false;
    const [room] = f.mm.addChannels(1, { type: 'O' });
    const old = f.mm.userPost('before the cursor');
    const lost = f.mm.userPost('in a channel archived since', { channel: room });
    f.mm.archive(room!, lost.create_at + 1);
    const away = f.mm.userPost('sent while away', { channel: f.mm.town });
    f.listen(old.create_at + 1);
    const live = await f.afterCatchUp();
    expect(f.delivered.map((m) => m.messageId)).toEqual([away.id, live.id]);
    expect(f.lines.filter((l) => l.level >= 40)).toEqual([expect.objectContaining({ level: 40, mattermostChannel: room!.id })]);
  });

  it('past the bound on the whole list (128 MiB; smaller here) the read stops with an error naming it', async () => {
    f.mm.addChannels(2_000);
    const kept: string[] = [];
    const read = readChannelList({ url: f.mm.url, token: f.mm.token }, 'users/me/channels', (c) => kept.push(c.id), f.stop.signal, {
      maxListBytes: 256 * 1024,
    });
    await expect(read).rejects.toThrow(new MattermostAnswerTooLarge(200, 256 * 1024));
    expect(kept.length).toBeGreaterThan(0);
    expect(kept.length).toBeLessThan(2_003);
  });
});
