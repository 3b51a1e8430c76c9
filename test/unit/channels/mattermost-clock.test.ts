import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../../helpers/daemon.js';
import { catchUpFixture } from './mattermost-fixture.js';

const DAY_MS = 24 * 60 * 60 * 1000;
const UNKNOWN = "the server's clock is unknown";

/**
 * A (re)start's catch-up floor (a day back) and a first start's cursor go by the server's clock:
 * its time from any answer that had a Date header (users/me, users/me/teams, else the last one
 * any answer had), this machine's only when none ever had one. A proxy may strip the header
 * from some answers, and this machine's clock may be days off the server's.
 */
describe("Mattermost: the catch-up floor by the server's clock", () => {
  const f = catchUpFixture('channeld-mm-clock-');
  const warned = () => f.lines.filter((l) => l.msg.includes(UNKNOWN));

  it.each([
    ['users/me', 'me'],
    ['the channel list', 'myChannels'],
  ] as const)(
    "a restart, %s answered without a Date, on a machine two days ahead of the server: the day back is counted by the server's clock from its other answers, and what came since the cursor is caught up",
    async (_, route) => {
      f.mm.clockOffsetMs = -2 * DAY_MS;
      f.mm.dateless.add(route);
      const old = f.mm.userPost('before the cursor');
      const away = f.mm.userPost('sent while away', { channel: f.mm.town });
      f.listen(old.create_at + 1);
      const live = await f.afterCatchUp();
      // Before, the floor was this machine's now less a day: a day into the server's future, past every post.
      expect(f.delivered.map((m) => m.messageId)).toEqual([away.id, live.id]);
      expect(f.mm.callsOf('myChannels')[0]!.query.get('last_delete_at')).toBe(String(old.create_at + 1));
      expect(warned()).toEqual([]);
      f.stop.abort();
      await f.listening;
      expect(await readFile(f.cursorFile, 'utf8')).toBe(`${live.create_at}\n`);
    },
  );

  it("the floor is never older than the inbox's duplicate window (cluster mode: this instance's cursor may be an hour old, and another instance answered since)", async () => {
    f.mm.clockOffsetMs = -600_000;
    const answered = f.mm.userPost('answered by another instance ten minutes ago', { channel: f.mm.town });
    f.mm.clockOffsetMs = 0;
    const away = f.mm.userPost('sent while the lease moved', { channel: f.mm.town });
    f.listen(Date.now() - 3_600_000, 90_000);
    const live = await f.afterCatchUp();
    expect(f.delivered.map((m) => m.messageId)).toEqual([away.id, live.id]);
    expect(f.delivered.some((m) => m.messageId === answered.id)).toBe(false);
  });

  it("cluster mode, a long first catch-up: each post's age is checked as it is reached, so one past the duplicate window by then is skipped, not handed over", async () => {
    f.mm.clockOffsetMs = -30_000;
    // Town square is listed, and so read, before off-topic.
    const first = f.mm.userPost('sent 30 s ago, read first', { channel: f.mm.town });
    const second = f.mm.userPost('sent 30 s ago, read second', { channel: f.mm.offTopic });
    f.mm.clockOffsetMs = 0;
    // The server's clock moves two minutes on between the two channels' reads (their Dates say so):
    // the second post is 2.5 minutes old when reached, past the 75 s reach (another instance may have answered it).
    f.mm.onCall = (call) => {
      if (call.route === 'since' && f.mm.callsOf('since').length === 2) f.mm.clockOffsetMs = 120_000;
    };
    f.listen(Date.now() - 3_600_000, 90_000);
    const live = await f.afterCatchUp();
    expect(f.mm.callsOf('since')).toHaveLength(2);
    expect(f.delivered.map((m) => m.messageId)).toEqual([first.id, live.id]);
    expect(f.delivered.some((m) => m.messageId === second.id)).toBe(false);
    expect(f.lines.filter((l) => l.msg === 'Mattermost catch-up delivered missed posts')).toEqual([expect.objectContaining({ posts: 1, skipped: 1 })]);
  });

  it('cluster mode, no cursor here (the lease moved from an instance that was killed): the first catch-up reads the duplicate window back, nothing older', async () => {
    f.mm.clockOffsetMs = -600_000;
    const answered = f.mm.userPost('answered by the killed instance ten minutes ago', { channel: f.mm.town });
    f.mm.clockOffsetMs = -5_000;
    const away = f.mm.userPost('sent while the lease moved', { channel: f.mm.town });
    f.mm.clockOffsetMs = 0;
    f.listen(undefined, 90_000, true);
    const live = await f.afterCatchUp();
    expect(f.delivered.map((m) => m.messageId)).toEqual([away.id, live.id]);
    expect(f.delivered.some((m) => m.messageId === answered.id)).toBe(false);
  });

  it('one node, no cursor (a first start): nothing from before it, even within the window', async () => {
    f.mm.clockOffsetMs = -5_000;
    f.mm.userPost('sent before the first start', { channel: f.mm.town });
    f.mm.clockOffsetMs = 0;
    f.listen(undefined, 90_000);
    await waitFor(() => f.ended || f.mm.connected);
    const live = f.mm.userPost('live', { channel: f.mm.dm });
    await waitFor(() => f.ended || f.delivered.length > 0);
    expect(f.delivered.map((m) => m.messageId)).toEqual([live.id]);
    expect(f.mm.callsOf('myChannels')).toEqual([]);
  });

  it('a reconnect within the run reads a day back, not only the duplicate window: the run held the lease all along, so nobody else answered', async () => {
    f.listen(undefined, 90_000);
    await waitFor(() => f.ended || f.mm.connected);
    f.mm.drop();
    const away = f.mm.userPost('sent while the socket was down', { channel: f.mm.town });
    // By the server's clock the reconnect comes ten minutes later: past the window, within the day.
    f.mm.clockOffsetMs = 600_000;
    const live = await f.afterCatchUp();
    expect(f.delivered.map((m) => m.messageId)).toEqual([away.id, live.id]);
  });

  it("a restart whose users/me answer has no Date, on a machine two days behind the server: a cursor older than a day by the server's clock is raised to a day before its now", async () => {
    f.mm.clockOffsetMs = 2 * DAY_MS;
    f.mm.dateless.add('me');
    const serverNowMs = () => Date.now() + f.mm.clockOffsetMs;
    const fromMs = serverNowMs();
    // Two and a half days old by the server's clock, half a day by this machine's.
    f.listen(fromMs - 2.5 * DAY_MS);
    await f.afterCatchUp();
    const toMs = serverNowMs();
    // The channels archived since the floor are asked for; before, since the cursor (this machine's day back was older).
    const floorMs = Number(f.mm.callsOf('myChannels')[0]!.query.get('last_delete_at'));
    // A Date header is whole seconds: up to one behind.
    expect(floorMs).toBeGreaterThanOrEqual(fromMs - 1000 - DAY_MS);
    expect(floorMs).toBeLessThanOrEqual(toMs - DAY_MS);
  });

  it("a first start whose users/me answer has no Date, on a machine two days ahead: the cursor is the server's now, so a post made while the socket is down is caught up", async () => {
    f.mm.clockOffsetMs = -2 * DAY_MS;
    f.mm.dateless.add('me');
    f.listen(undefined);
    await waitFor(() => f.ended || f.mm.connected);
    f.mm.drop();
    // No socket open (the reconnect waits first): only the catch-up can bring it.
    const away = f.mm.userPost('sent while the socket was down', { channel: f.mm.town });
    const live = await f.afterCatchUp();
    // Before, the cursor was this machine's now: two days past the post, which was never read.
    expect(f.delivered.map((m) => m.messageId)).toEqual([away.id, live.id]);
    f.stop.abort();
    await f.listening;
    expect(await readFile(f.cursorFile, 'utf8')).toBe(`${live.create_at}\n`);
  });

  it('a listener restarted after a failure, users/me and users/me/teams now without a Date, on a machine two days ahead: the floor counts from the last Date an earlier answer had', async () => {
    f.mm.clockOffsetMs = -2 * DAY_MS;
    const old = f.mm.userPost('before the cursor');
    const away = f.mm.userPost('sent while away', { channel: f.mm.town });
    // The list fails half-way: the listener ends, and is restarted.
    f.mm.fail('myChannels', { cutAfter: 0 });
    f.listen(old.create_at + 1);
    await waitFor(() => f.ended);
    expect(f.ended!.err).toMatchObject({ code: 'CHANNEL_UNAVAILABLE' });
    for (const route of ['me', 'teams', 'myChannels', 'since'] as const) f.mm.dateless.add(route);
    f.listenAgain();
    const live = await f.afterCatchUp('myChannels', undefined, 2);
    expect(f.delivered.map((m) => m.messageId)).toEqual([away.id, live.id]);
    expect(warned()).toEqual([]);
  });

  it("no answer with a Date at all: this machine's clock, said once (warn) over a listener restart", async () => {
    for (const route of ['me', 'teams', 'myChannels', 'since'] as const) f.mm.dateless.add(route);
    const old = f.mm.userPost('before the cursor');
    const away = f.mm.userPost('sent while away', { channel: f.mm.town });
    f.mm.fail('myChannels', { cutAfter: 0 });
    f.listen(old.create_at + 1);
    await waitFor(() => f.ended);
    f.listenAgain();
    const live = await f.afterCatchUp('myChannels', undefined, 2);
    expect(f.delivered.map((m) => m.messageId)).toEqual([away.id, live.id]);
    expect(warned()).toEqual([expect.objectContaining({ level: 40, channel: 'mm' })]);
  });
});
