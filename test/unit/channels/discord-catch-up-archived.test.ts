import { readFile } from 'node:fs/promises';
import { describe, expect, it, onTestFinished } from 'vitest';
import { DiscordAdapter } from '../../../channels/discord/adapter.js';
import { ARCHIVED_THREADS_PAGE, CATCH_UP_MAX_THREAD_PARENTS } from '../../../channels/discord/archived-threads.js';
import { createLogger } from '../../../src/observe/logger.js';
import type { FakeDiscord } from '../../fakes/discord/server.js';
import { LogSink, waitFor } from '../../helpers/daemon.js';
import { discordCursorFile, Inbox } from '../../helpers/discord.js';
import { withDiscord } from '../../helpers/platforms.js';

/** Listens until `stop` or the test's end; resolves once the first catch-up is over (its info line, or its warning when incomplete). */
async function caughtUp(dc: FakeDiscord, cursorFile: string, inbox: Inbox, logs = new LogSink()): Promise<LogSink & { stop: () => Promise<void> }> {
  const log = createLogger({ level: 'debug', destination: logs });
  const adapter = new DiscordAdapter({ id: 'dc', restApi: dc.restApi, guilds: [], log, cursorFile }, dc.token);
  const ctl = new AbortController();
  const run = adapter.listen(inbox.deliver, ctl.signal, () => {});
  const stop = async () => {
    ctl.abort();
    await run.catch(() => {});
  };
  onTestFinished(stop);
  await waitFor(() => logs.entries().some((e) => /^Discord catch-up (delivered|incomplete)/.test(String(e.msg))), 15_000);
  return Object.assign(logs, { stop });
}

/** The channels whose messages the catch-up read (`GET /channels/{id}/messages`). */
const readChannels = (dc: FakeDiscord) => dc.rest.filter((c) => c.method === 'GET' && /\/messages$/.test(c.path)).map((c) => c.path.split('/')[4]);
/** The channels whose archived threads the catch-up listed. */
const listedParents = (dc: FakeDiscord) => new Set(dc.restCalls('GET', 'threads').map((c) => c.path.split('/')[4]));

describe('the Discord catch-up of threads archived while away', () => {
  it('answers once a question left in a thread that Discord archived before the bot came back, in its thread as a live one', async () => {
    const dc = await withDiscord();
    const path = await discordCursorFile(Date.now() - 60_000);
    // Asked while the bot was away; the thread went quiet and was archived (not among GUILD_CREATE's active threads).
    const asked = dc.whileAway(() => dc.guildMessage('anyone?', { thread: 1, mention: true }), { ageMs: 30_000 });
    dc.archiveThread(dc.guild.thread);
    const inbox = new Inbox();
    const logs = await caughtUp(dc, path, inbox);
    expect(inbox.kept.get(`dc:${asked}`)).toMatchObject({
      text: 'anyone?',
      threadId: dc.guild.thread,
      chat: { id: dc.guild.channel, type: 'group' },
      addressed: true,
    });
    expect(logs.entries().find((e) => String(e.msg).startsWith('Discord catch-up delivered'))).toMatchObject({ messages: 1 });
    // Replayed live (the thread unarchived by a reply, say): the very same message, which the inbox keeps once.
    dc.dispatchStored(asked);
    await waitFor(() => inbox.all.length === 2, 10_000);
    expect(inbox.all[1]).toEqual(inbox.all[0]);
    expect(inbox.kept.size).toBe(1);
    expect(listedParents(dc)).toEqual(new Set([dc.guild.channel]));
    // One page each, newest archived first (no `before`).
    for (const c of dc.restCalls('GET', 'threads')) expect(c.query).toBe(`limit=${ARCHIVED_THREADS_PAGE}`);
  });

  it("reads archived forum posts, announcement threads and the private threads the bot joined, however old the parent channel's own last message", async () => {
    const dc = await withDiscord();
    const path = await discordCursorFile(Date.now() - 60_000);
    const forum = dc.addParent(15);
    const news = dc.addParent(5);
    const post = dc.addThread(forum);
    const newsThread = dc.addThread(news);
    const joined = dc.addThread(dc.guild.channel, { private: true, joined: true });
    const notJoined = dc.addThread(dc.guild.channel, { private: true });
    // The text channel's last message is older than the cursor: a message in its threads does not move it.
    dc.whileAway(() => dc.guildMessage('old chatter in the channel'), { ageMs: 120_000 });
    const ids = dc.whileAway(() => ({
      post: dc.guildMessage('in the forum post', { in: post, mention: true }),
      news: dc.guildMessage('in the announcement thread', { in: newsThread, mention: true }),
      joined: dc.guildMessage('in the private thread', { in: joined, mention: true }),
      notJoined: dc.guildMessage('in a private thread the bot is not in', { in: notJoined, mention: true }),
    }));
    for (const t of [post, newsThread, joined, notJoined]) dc.archiveThread(t);
    const inbox = new Inbox();
    await caughtUp(dc, path, inbox);
    expect(inbox.kept.get(`dc:${ids.post}`)).toMatchObject({ threadId: post, chat: { id: forum } });
    expect(inbox.kept.get(`dc:${ids.news}`)).toMatchObject({ threadId: newsThread, chat: { id: news } });
    expect(inbox.kept.get(`dc:${ids.joined}`)).toMatchObject({ threadId: joined, chat: { id: dc.guild.channel } });
    expect(inbox.kept.has(`dc:${ids.notJoined}`)).toBe(false);
    // The joined private listing is asked of the text channel only (announcement and forum channels hold no private threads).
    const listings = dc.restCalls('GET', 'threads').map((c) => c.path.replace(/^\/api\/v10/, ''));
    expect(listings.sort()).toEqual(
      [
        `/channels/${dc.guild.channel}/threads/archived/public`,
        `/channels/${dc.guild.channel}/users/@me/threads/archived/private`,
        `/channels/${forum}/threads/archived/public`,
        `/channels/${news}/threads/archived/public`,
      ].sort(),
    );
  });

  it('does not read a thread archived before the cursor, nor one archived since whose last message is older than the cursor', async () => {
    const dc = await withDiscord();
    const cursorMs = Date.now() - 60_000;
    const path = await discordCursorFile(cursorMs);
    const before = dc.addThread(dc.guild.channel);
    const quiet = dc.addThread(dc.guild.channel);
    dc.whileAway(
      () => {
        dc.guildMessage('answered long ago', { in: before, mention: true });
        dc.guildMessage('answered long ago too', { in: quiet, mention: true });
      },
      { ageMs: 600_000 },
    );
    dc.archiveThread(before, { atMs: cursorMs - 1000 });
    // Archived by a moderator while away: nothing new in it.
    dc.archiveThread(quiet);
    const asked = dc.whileAway(() => dc.guildMessage('anyone?', { thread: 2, mention: true }), { ageMs: 30_000 });
    dc.archiveThread(dc.guild.thread2);
    const inbox = new Inbox();
    await caughtUp(dc, path, inbox);
    expect([...inbox.kept.keys()]).toEqual([`dc:${asked}`]);
    expect(readChannels(dc)).toContain(dc.guild.thread2);
    expect(readChannels(dc)).not.toContain(before);
    expect(readChannels(dc)).not.toContain(quiet);
  });

  it('skips a channel whose archived threads answer 403 (logged at debug), catches up the rest, and the catch-up completes', async () => {
    const dc = await withDiscord();
    const path = await discordCursorFile(Date.now() - 60_000);
    const hidden = dc.addParent(0);
    const other = dc.addParent(0);
    const inHidden = dc.addThread(hidden);
    const inOther = dc.addThread(other);
    const ids = dc.whileAway(() => ({
      hidden: dc.guildMessage('behind a 403', { in: inHidden, mention: true }),
      other: dc.guildMessage('in the other channel', { in: inOther, mention: true }),
      channel: dc.guildMessage('in the channel', { mention: true }),
    }));
    dc.archiveThread(inHidden);
    dc.archiveThread(inOther);
    dc.forbidChannel(hidden);
    const inbox = new Inbox();
    const logs = await caughtUp(dc, path, inbox);
    expect(inbox.kept.has(`dc:${ids.other}`)).toBe(true);
    expect(inbox.kept.has(`dc:${ids.channel}`)).toBe(true);
    expect(inbox.kept.has(`dc:${ids.hidden}`)).toBe(false);
    const skipped = logs.entries().filter((e) => e.msg === "Discord channel's archived threads not listable; their catch-up is skipped");
    expect(skipped).toMatchObject([{ level: 20, discordChannel: hidden }]);
    // A refused public listing is not followed by the private one.
    expect(dc.restCalls('GET', 'threads').filter((c) => c.path.includes(`/channels/${hidden}/`))).toHaveLength(1);
    expect(logs.entries().some((e) => String(e.msg).startsWith('Discord catch-up incomplete'))).toBe(false);
  });

  it('a listing that fails otherwise (a 5xx) is warned and leaves the cursor where it was, so the next start lists it again', async () => {
    const dc = await withDiscord();
    const startMs = Date.now() - 60_000;
    const path = await discordCursorFile(startMs);
    const asked = dc.whileAway(() => dc.guildMessage('anyone?', { thread: 1, mention: true }), { ageMs: 30_000 });
    dc.archiveThread(dc.guild.thread);
    // discord.js's own retries included, the channel's public listing fails.
    dc.fail('GET threads', { status: 502 }, 4);
    const inbox = new Inbox();
    const logs = await caughtUp(dc, path, inbox);
    expect(logs.entries().filter((e) => e.level === 40 && String(e.msg).startsWith("Discord channel's archived threads could not be listed now"))).toHaveLength(
      1,
    );
    expect(logs.entries().some((e) => String(e.msg).startsWith('Discord catch-up incomplete'))).toBe(true);
    expect(inbox.kept.size).toBe(0);
    await logs.stop();
    expect((await readFile(path, 'utf8')).trim()).toBe(String(startMs));

    await caughtUp(dc, path, inbox);
    expect(inbox.kept.has(`dc:${asked}`)).toBe(true);
  });

  it(`lists the archived threads of ${CATCH_UP_MAX_THREAD_PARENTS} channels at most, the most recently active first, and warns of the others`, async () => {
    const dc = await withDiscord();
    const path = await discordCursorFile(Date.now() - 60_000);
    // One more than the bound besides the guild's first channel (whose threads are the newest activity).
    const parents = Array.from({ length: CATCH_UP_MAX_THREAD_PARENTS + 1 }, () => dc.addParent(0));
    // Each channel's last message before the cursor, the first ones the oldest: the two least active are parents[0] and parents[1].
    for (const [i, p] of parents.entries()) dc.whileAway(() => dc.guildMessage(`chatter ${i}`, { in: p }), { ageMs: 600_000 - i * 1000 });
    const skippedThread = dc.addThread(parents[0]!);
    const listedThread = dc.addThread(parents.at(-1)!);
    const ids = dc.whileAway(() => ({
      skipped: dc.guildMessage('in the least active channel', { in: skippedThread, mention: true }),
      listed: dc.guildMessage('in the most active channel', { in: listedThread, mention: true }),
    }));
    dc.archiveThread(skippedThread);
    dc.archiveThread(listedThread);
    const inbox = new Inbox();
    const logs = await caughtUp(dc, path, inbox);
    const listed = listedParents(dc);
    expect(listed.size).toBe(CATCH_UP_MAX_THREAD_PARENTS);
    expect(listed.has(parents[0]!)).toBe(false);
    expect(listed.has(parents[1]!)).toBe(false);
    expect(listed.has(dc.guild.channel)).toBe(true);
    expect(inbox.kept.has(`dc:${ids.listed}`)).toBe(true);
    expect(inbox.kept.has(`dc:${ids.skipped}`)).toBe(false);
    expect(logs.entries().filter((e) => e.level === 40 && String(e.msg).includes('than one catch-up lists the archived threads of'))).toMatchObject([
      { parents: CATCH_UP_MAX_THREAD_PARENTS + 2, maxParents: CATCH_UP_MAX_THREAD_PARENTS },
    ]);
  });
});
