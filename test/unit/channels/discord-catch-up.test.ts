import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { describe, expect, it, onTestFinished, vi } from 'vitest';
import { DiscordAdapter } from '../../../channels/discord/adapter.js';
import { CATCH_UP_MAX_MESSAGES_PER_CHANNEL, MAX_KNOWN_DM_CHANNELS } from '../../../channels/discord/catch-up.js';
import { KnownDmChannels, SHARED_DM_CHANNELS_TIMEOUT_MS } from '../../../channels/discord/dm-channels.js';
import type { SharedRecord } from '../../../src/contracts/shared-record.js';
import { CodedError } from '../../../src/contracts/errors.js';
import { createLogger } from '../../../src/observe/logger.js';
import { type FakeDiscord, snowflake } from '../../fakes/discord/server.js';
import { LogSink, waitFor } from '../../helpers/daemon.js';
import { discordCursorFile, Inbox } from '../../helpers/discord.js';
import { withDiscord } from '../../helpers/platforms.js';

const readCursor = async (path: string) => Number((await readFile(path, 'utf8').catch(() => '')).trim()) || undefined;

function adapterOn(
  dc: FakeDiscord,
  cursorFile: string,
  logs = new LogSink(),
  duplicateWindowMs?: () => number,
  listenerMoves = false,
  sharedDmChannels?: SharedRecord,
): DiscordAdapter {
  const log = createLogger({ level: 'debug', destination: logs });
  return new DiscordAdapter(
    {
      id: 'dc',
      restApi: dc.restApi,
      guilds: [],
      log,
      cursorFile,
      ...(duplicateWindowMs ? { duplicateWindowMs } : {}),
      listenerMoves,
      ...(sharedDmChannels ? { sharedDmChannels } : {}),
    },
    dc.token,
  );
}

/** `adapter.listen` until the returned stop (or the test's end); resolves once connected. */
async function listening(adapter: DiscordAdapter, inbox: Inbox): Promise<{ stop: (reason?: unknown) => Promise<void> }> {
  const ctl = new AbortController();
  let connected = false;
  const run = adapter.listen(inbox.deliver, ctl.signal, () => (connected = true));
  const stop = async (reason?: unknown) => {
    ctl.abort(reason);
    await run.catch(() => {});
  };
  onTestFinished(() => stop());
  await waitFor(() => connected, 10_000);
  return { stop };
}

/** The catch-up's reads: `GET /channels/{id}/messages`. */
const historyReads = (dc: FakeDiscord) => dc.rest.filter((c) => c.method === 'GET' && /\/channels\/\d+\/messages$/.test(c.path));

describe('the Discord catch-up', () => {
  it('delivers what was posted while no listener ran once, oldest first, through the live path, and a repeat live is answered once', async () => {
    const dc = await withDiscord();
    const path = await discordCursorFile();
    const adapter = adapterOn(dc, path);
    const inbox = new Inbox();
    const first = await listening(adapter, inbox);
    dc.dm('hello');
    const live = dc.guildMessage('live', { mention: true });
    await waitFor(() => inbox.all.length === 2, 10_000);
    const liveAtMs = inbox.all[1]!.receivedAt;
    await waitFor(async () => (await readCursor(path)) === liveAtMs, 10_000);
    await first.stop();

    const ids = dc.whileAway(() => ({
      a1: dc.guildMessage('a1', { mention: true }),
      t1: dc.guildMessage('t1', { mention: true, thread: 1 }),
      a2: dc.guildMessage('a2 unaddressed'),
      bot: dc.guildMessage('a3 from a bot', { mention: true, author: { id: '777777777777777777', username: 'other-bot', bot: true } }),
      d1: dc.dm('d1'),
    }));
    const away = new Set(Object.values(ids));
    const from = inbox.all.length;
    await listening(adapter, inbox);
    await waitFor(() => [...away].every((id) => inbox.kept.has(`dc:${id}`)), 10_000);
    // The cursor's own millisecond is read again ('live'): the inbox drops that repeat.
    const caught = inbox.all.slice(from).filter((m) => away.has(m.messageId));
    expect(caught).toHaveLength(5);
    const inChat = (chat: string) => caught.filter((m) => m.chat.id === chat && !m.threadId).map((m) => m.text);
    expect(inChat(dc.guild.channel)).toEqual(['a1', 'a2 unaddressed', 'a3 from a bot']);
    expect(inChat(dc.dmChannel)).toEqual(['d1']);
    const byText = new Map(caught.map((m) => [m.text, m]));
    expect(byText.get('a1')).toMatchObject({ messageId: ids.a1, addressed: true, chat: { type: 'group' } });
    expect(byText.get('t1')).toMatchObject({ messageId: ids.t1, threadId: dc.guild.thread, chat: { id: dc.guild.channel } });
    expect(byText.get('a2 unaddressed')).toMatchObject({ messageId: ids.a2, addressed: false });
    expect(byText.get('a3 from a bot')).toMatchObject({ messageId: ids.bot, sender: { isBot: true } });
    expect(byText.get('d1')).toMatchObject({ messageId: ids.d1, chat: { id: dc.dmChannel, type: 'dm' }, addressed: true });
    expect([...inbox.kept.values()].filter((m) => m.messageId === live)).toHaveLength(1);
    for (const c of historyReads(dc)) expect(new URLSearchParams(c.query).get('limit')).toBe(String(CATCH_UP_MAX_MESSAGES_PER_CHANNEL));

    // The same messages live (a replay): the very same ChannelMessage, so the inbox keeps each once.
    const before = inbox.all.length;
    dc.dispatchStored(ids.a1);
    dc.dispatchStored(ids.t1);
    await waitFor(() => inbox.all.length - before === 2, 10_000);
    expect(inbox.all.at(-2)).toEqual(byText.get('a1'));
    expect(inbox.all.at(-1)).toEqual(byText.get('t1'));
    expect([...inbox.kept.values()].filter((m) => m.messageId === ids.a1)).toHaveLength(1);
    await waitFor(async () => ((await readCursor(path)) ?? 0) >= byText.get('d1')!.receivedAt, 10_000);
  });

  it('after a restart of the daemon (a new adapter) catches up on DMs too: the DM channels it knew are kept beside the cursor', async () => {
    const dc = await withDiscord();
    const path = await discordCursorFile();
    const inbox = new Inbox();
    const first = await listening(adapterOn(dc, path), inbox);
    dc.dm('hello');
    await waitFor(() => inbox.all.length === 1, 10_000);
    await first.stop();
    expect(JSON.parse(await readFile(path.replace(/\.cursor$/, '.dm-channels.json'), 'utf8'))).toEqual([dc.dmChannel]);

    const away = dc.whileAway(() => dc.dm('sent while the daemon was down'));
    await listening(adapterOn(dc, path), inbox);
    await waitFor(() => inbox.kept.has(`dc:${away}`), 10_000);
    // 'hello' is the cursor's own millisecond, read again and dropped by the inbox as a repeat.
    expect([...inbox.kept.values()].map((m) => m.text)).toEqual(['hello', 'sent while the daemon was down']);
  });

  it("with several shards in one client, a shard that identifies later still reads from where the cursor stood (another shard's catch-up does not move it first)", async () => {
    const dc = await withDiscord();
    dc.recommendedShards = 2;
    const g0 = dc.addGuild(0, 2);
    const g1 = dc.addGuild(1, 2);
    const path = await discordCursorFile(Date.now() - 60_000);
    const older = dc.whileAway(() => dc.guildMessage('sent to shard 1 while away', { guild: g1, mention: true }), { ageMs: 30_000 });
    const newer = dc.whileAway(() => dc.guildMessage('sent to shard 0 while away', { guild: g0, mention: true }), { ageMs: 10_000 });
    const inbox = new Inbox();
    const log = createLogger({ level: 'debug', destination: new LogSink() });
    const adapter = new DiscordAdapter({ id: 'dc', restApi: dc.restApi, guilds: [], shards: 2, log, cursorFile: path }, dc.token);
    const ctl = new AbortController();
    const run = adapter.listen(inbox.deliver, ctl.signal, () => {});
    onTestFinished(async () => {
      ctl.abort();
      await run.catch(() => {});
    });
    // discord.js identifies the shards 5 s apart (max_concurrency 1): shard 0 is caught up first.
    await waitFor(() => inbox.kept.has(`dc:${newer}`), 10_000);
    await waitFor(() => inbox.kept.has(`dc:${older}`), 20_000);
    // Both are in: the cursor moves past them only now.
    await waitFor(async () => (await readCursor(path)) === inbox.kept.get(`dc:${newer}`)!.receivedAt, 10_000);
  });

  it('does not catch up after a RESUME, and does after the session is lost and identified anew', async () => {
    const dc = await withDiscord();
    const path = await discordCursorFile(Date.now() - 60_000);
    const inbox = new Inbox();
    await listening(adapterOn(dc, path), inbox);
    // The first READY's catch-up reads the guild's channel and its two threads.
    await waitFor(() => historyReads(dc).length === 3, 10_000);
    const away = dc.whileAway(() => dc.guildMessage('sent while resuming', { mention: true }));
    dc.requestReconnect();
    await waitFor(() => dc.gateway.resumes === 1 && dc.connected, 10_000);
    dc.guildMessage('after the resume', { mention: true });
    await waitFor(() => inbox.texts().includes('after the resume'), 10_000);
    expect(inbox.texts()).toEqual(['after the resume']);
    expect(historyReads(dc)).toHaveLength(3);

    dc.invalidateSession(false);
    await waitFor(() => inbox.all.some((m) => m.messageId === away), 15_000);
    expect(dc.gateway.identifies).toBe(2);
    // Read again from the cursor: what came live is delivered again, and the inbox keeps it once.
    expect([...inbox.kept.values()].map((m) => m.text)).toEqual(['after the resume', 'sent while resuming']);
  });

  it('does not catch up on a session handed over by an upgrade, which resumed', async () => {
    const dc = await withDiscord();
    const path = await discordCursorFile(Date.now() - 60_000);
    const inbox = new Inbox();
    const old = adapterOn(dc, path);
    const first = await listening(old, inbox);
    await waitFor(() => historyReads(dc).length === 3, 10_000);
    // The old process's catch-up has finished once a live message moves the cursor (it is held
    // until then); a hand-over before that would carry the note that keeps the cursor (tested below).
    const before = dc.guildMessage('before the hand-over', { mention: true });
    await waitFor(async () => (await readCursor(path)) === inbox.kept.get(`dc:${before}`)?.receivedAt, 10_000);
    await first.stop(new CodedError('UPGRADE_HANDED_OVER', 'handed over'));
    const state = old.handoverState() as { catchUpOwed?: boolean } | undefined;
    expect(state).toBeDefined();
    expect(state?.catchUpOwed).toBeUndefined();
    dc.whileAway(() => dc.guildMessage('sent during the hand-over', { mention: true }));

    const next = adapterOn(dc, path);
    next.resumeFrom(state);
    await listening(next, inbox);
    await waitFor(() => dc.gateway.resumes === 1, 10_000);
    const marker = dc.guildMessage('after the hand-over', { mention: true });
    await waitFor(() => inbox.texts().includes('after the hand-over'), 10_000);
    // Stored live: the cursor moves on (and no catch-up read anything).
    await waitFor(async () => (await readCursor(path)) === inbox.all.find((m) => m.messageId === marker)!.receivedAt, 10_000);
    expect(inbox.texts()).toEqual(['before the hand-over', 'after the hand-over']);
    expect(historyReads(dc)).toHaveLength(3);
    expect(dc.gateway.identifies).toBe(1);
  });

  it('an upgrade after a catch-up that did not finish hands over a note: the new process keeps the cursor before the gap for its run, and a restart reads it', async () => {
    const dc = await withDiscord();
    const startMs = Date.now() - 60_000;
    const path = await discordCursorFile(startMs);
    const missed = dc.whileAway(() => dc.guildMessage('sent while away', { mention: true }));
    // The catch-up's first read fails (discord.js's own retries included): it does not finish.
    dc.fail('GET message', { status: 502 }, 4);
    const logs = new LogSink();
    const inbox = new Inbox();
    const old = adapterOn(dc, path, logs);
    const first = await listening(old, inbox);
    await waitFor(() => logs.entries().some((e) => String(e.msg).startsWith('Discord catch-up incomplete')), 15_000);
    await first.stop(new CodedError('UPGRADE_HANDED_OVER', 'handed over'));
    const state = old.handoverState() as { catchUpOwed?: boolean } | undefined;
    expect(state?.catchUpOwed).toBe(true);

    const next = adapterOn(dc, path);
    next.resumeFrom(state);
    const second = await listening(next, inbox);
    await waitFor(() => dc.gateway.resumes === 1, 10_000);
    const live = dc.guildMessage('after the hand-over', { mention: true });
    await waitFor(() => inbox.kept.has(`dc:${live}`), 10_000);
    await second.stop();
    // Stored live, but the cursor stayed before the gap the resumed session does not replay.
    expect(await readCursor(path)).toBe(startMs);
    expect(inbox.kept.has(`dc:${missed}`)).toBe(false);

    await listening(adapterOn(dc, path), inbox);
    await waitFor(() => inbox.kept.has(`dc:${missed}`), 10_000);
  });

  it('on a first start (no cursor) delivers nothing from before it, and starts the cursor at now', async () => {
    const dc = await withDiscord();
    const path = await discordCursorFile();
    dc.whileAway(() => dc.guildMessage('from before the first start', { mention: true }), { ageMs: 60_000 });
    const startedMs = Date.now();
    const inbox = new Inbox();
    await listening(adapterOn(dc, path), inbox);
    await waitFor(async () => ((await readCursor(path)) ?? 0) >= startedMs, 10_000);
    dc.guildMessage('live', { mention: true });
    await waitFor(() => inbox.all.length === 1, 10_000);
    expect(inbox.texts()).toEqual(['live']);
    expect(historyReads(dc)).toEqual([]);
  });

  it("reads nothing older than the inbox's duplicate window (cluster mode: this instance's cursor may be hours old, and another answered since)", async () => {
    const dc = await withDiscord();
    // This instance last ran the listener an hour ago; the shared inbox recognises 90 s.
    const path = await discordCursorFile(Date.now() - 3_600_000);
    const old = dc.whileAway(() => dc.guildMessage('answered by another instance ten minutes ago', { mention: true }), { ageMs: 600_000 });
    const recent = dc.whileAway(() => dc.guildMessage('sent while the lease moved', { mention: true }), { ageMs: 5_000 });
    const inbox = new Inbox();
    await listening(
      adapterOn(dc, path, new LogSink(), () => 90_000),
      inbox,
    );
    await waitFor(() => inbox.kept.has(`dc:${recent}`), 10_000);
    expect(inbox.kept.has(`dc:${old}`)).toBe(false);
    expect(inbox.texts()).toEqual(['sent while the lease moved']);
  });

  it('cluster mode, no cursor here (the lease moved from an instance that was killed): catches up on the duplicate window, nothing older', async () => {
    const dc = await withDiscord();
    const path = await discordCursorFile();
    const old = dc.whileAway(() => dc.guildMessage('answered by the killed instance ten minutes ago', { mention: true }), { ageMs: 600_000 });
    const recent = dc.whileAway(() => dc.guildMessage('sent while the lease moved', { mention: true }), { ageMs: 5_000 });
    const inbox = new Inbox();
    await listening(
      adapterOn(dc, path, new LogSink(), () => 90_000, true),
      inbox,
    );
    await waitFor(() => inbox.kept.has(`dc:${recent}`), 10_000);
    expect(inbox.kept.has(`dc:${old}`)).toBe(false);
    dc.guildMessage('live', { mention: true });
    await waitFor(() => inbox.all.length === 2, 10_000);
    expect(inbox.texts()).toEqual(['sent while the lease moved', 'live']);
  });

  it('skips a channel that answers 403 (logged) and catches up the others', async () => {
    const dc = await withDiscord();
    const path = await discordCursorFile(Date.now() - 60_000);
    dc.whileAway(() => {
      dc.guildMessage('in the hidden thread', { mention: true, thread: 1 });
      dc.guildMessage('in the channel', { mention: true });
      dc.guildMessage('in the other thread', { mention: true, thread: 2 });
    });
    dc.forbidChannel(dc.guild.thread);
    const logs = new LogSink();
    const inbox = new Inbox();
    await listening(adapterOn(dc, path, logs), inbox);
    await waitFor(() => inbox.all.length === 2, 10_000);
    expect(inbox.texts().sort()).toEqual(['in the channel', 'in the other thread']);
    // The channels are read most recently active first: the refused one (its message the oldest) may come after the others.
    const isSkipped = (e: { msg?: unknown }) => e.msg === 'Discord channel not readable; its catch-up is skipped';
    await waitFor(() => logs.entries().some(isSkipped), 10_000);
    const skipped = logs.entries().filter(isSkipped);
    expect(skipped).toMatchObject([{ discordChannel: dc.guild.thread }]);
    // The listener goes on.
    dc.guildMessage('live', { mention: true });
    await waitFor(() => inbox.texts().includes('live'), 10_000);
  });

  it('a channel that fails to be read (a 5xx) leaves the cursor where it was for the run, so the next start reads it again; the others are caught up', async () => {
    const dc = await withDiscord();
    const startMs = Date.now() - 60_000;
    const path = await discordCursorFile(startMs);
    const ids = dc.whileAway(() => ({
      channel: dc.guildMessage('in the channel', { mention: true }),
      thread: dc.guildMessage('in the thread', { mention: true, thread: 1 }),
    }));
    // Every read fails for a while: discord.js's own retries included, the first channel read fails.
    dc.fail('GET message', { status: 502 }, 4);
    const logs = new LogSink();
    const inbox = new Inbox();
    const first = await listening(adapterOn(dc, path, logs), inbox);
    await waitFor(() => logs.entries().some((e) => e.msg === 'Discord catch-up incomplete: the cursor stays, so a restart reads the gap again'), 15_000);
    expect(logs.entries().filter((e) => String(e.msg).startsWith('Discord channel could not be read now'))).toHaveLength(1);
    const live = dc.guildMessage('live', { mention: true });
    await waitFor(() => inbox.kept.has(`dc:${live}`), 10_000);
    await first.stop();
    expect(await readCursor(path)).toBe(startMs);

    // The next start reads the gap again and gets what the failed read missed.
    await listening(adapterOn(dc, path), inbox);
    await waitFor(() => inbox.kept.has(`dc:${ids.channel}`) && inbox.kept.has(`dc:${ids.thread}`), 10_000);
  });

  it('over the per-channel bound delivers the newest messages and warns naming the gap', async () => {
    const dc = await withDiscord();
    const path = await discordCursorFile(Date.now() - 60_000);
    const over = CATCH_UP_MAX_MESSAGES_PER_CHANNEL + 1;
    const ids = dc.whileAway(() => Array.from({ length: over }, (_, i) => dc.guildMessage(`m${i}`, { mention: true })), { ageMs: 1000 });
    const logs = new LogSink();
    const inbox = new Inbox();
    await listening(adapterOn(dc, path, logs), inbox);
    await waitFor(() => inbox.all.length === CATCH_UP_MAX_MESSAGES_PER_CHANNEL, 10_000);
    expect(inbox.texts()).toEqual(Array.from({ length: CATCH_UP_MAX_MESSAGES_PER_CHANNEL }, (_, i) => `m${i + 1}`));
    await waitFor(() => logs.entries().some((e) => e.level === 40 && String(e.msg).includes('in the gap')), 10_000);
    expect(logs.entries().find((e) => String(e.msg).includes('in the gap'))).toMatchObject({
      discordChannel: dc.guild.channel,
      firstSkipped: ids[0],
      firstKept: ids[1],
    });
  });
});

describe('the DM channels a Discord catch-up reads', () => {
  it('a malformed, oversized or foreign file is read as an empty list; ids are kept newest first, at most the bound, one write per change', async () => {
    const path = await discordCursorFile();
    const file = path.replace(/\.cursor$/, '.dm-channels.json');
    await mkdir(dirname(file), { recursive: true });
    for (const bad of ['not json', JSON.stringify({ ids: ['1'] }), JSON.stringify(['1'.repeat(5000)]), `[${'"1",'.repeat(2000)}"1"]`]) {
      await writeFile(file, bad);
      const dms = new KnownDmChannels(file, () => {});
      await dms.load(new AbortController().signal);
      expect(dms.ids).toEqual([]);
    }
    await writeFile(file, JSON.stringify(['12', 'x', 34, '56']));
    const dms = new KnownDmChannels(file, () => {});
    await dms.load(new AbortController().signal);
    expect(dms.ids).toEqual(['12', '56']);
    for (let i = 0; i < MAX_KNOWN_DM_CHANNELS + 5; i++) dms.seen(String(1000 + i));
    dms.seen(String(1000 + MAX_KNOWN_DM_CHANNELS + 4));
    await dms.flushed();
    const stored = JSON.parse(await readFile(file, 'utf8')) as string[];
    expect(stored).toHaveLength(MAX_KNOWN_DM_CHANNELS);
    expect(stored[0]).toBe(String(1000 + MAX_KNOWN_DM_CHANNELS + 4));
    expect(stored).toEqual(dms.ids);
  });
});

/**
 * A SharedRecord as every instance sees it, in memory (the PostgreSQL one has its own test,
 * test/unit/cluster/pg-channel-records.test.ts). `held` makes each write wait until the test
 * lets it go (`release`), ignoring its signal as a record that hangs would.
 */
class MemoryRecord implements SharedRecord {
  value: string | undefined;
  readonly writes: string[] = [];
  held = false;
  readonly #waiting: Array<() => void> = [];

  async read(signal: AbortSignal): Promise<string | undefined> {
    signal.throwIfAborted();
    return this.value;
  }

  write(value: string, signal: AbortSignal): Promise<void> {
    signal.throwIfAborted();
    this.writes.push(value);
    if (!this.held) {
      this.value = value;
      return Promise.resolve();
    }
    return new Promise((resolve) =>
      this.#waiting.push(() => {
        this.value = value;
        resolve();
      }),
    );
  }

  /** Lets the oldest held write finish. */
  release(): void {
    this.#waiting.shift()?.();
  }

  ids(): string[] {
    return this.value === undefined ? [] : (JSON.parse(this.value) as string[]);
  }
}

/** A SharedRecord whose PostgreSQL cannot be reached. */
const unreachable: SharedRecord = {
  read: () => Promise.reject(new CodedError('CLUSTER_UNAVAILABLE', 'PostgreSQL: connect ECONNREFUSED 127.0.0.1:5432')),
  write: () => Promise.reject(new CodedError('CLUSTER_UNAVAILABLE', 'PostgreSQL: connect ECONNREFUSED 127.0.0.1:5432')),
};

describe('the DM channels a Discord catch-up reads, shared in cluster mode', () => {
  const bea = { id: '515151515151515151', username: 'bea' };

  it('an instance that takes the listener over (a state dir of its own) catches up on a DM sent while away in a DM channel only the instance before it saw', async () => {
    const dc = await withDiscord();
    const shared = new MemoryRecord();
    const inbox = new Inbox();
    // Bea's DM channel: only the first instance ever saw a message from it.
    const beas = snowflake();
    const first = await listening(
      adapterOn(dc, await discordCursorFile(), new LogSink(), () => 90_000, true, shared),
      inbox,
    );
    dc.dm('hello from bea', bea, beas);
    await waitFor(() => inbox.all.length === 1, 10_000);
    await waitFor(() => shared.ids().includes(beas), 10_000);
    await first.stop();

    // Nobody listens: Discord keeps it in the channel's history, and a new session gets no replay.
    const away = dc.whileAway(() => dc.dm('sent while the lease moved', bea, beas), { ageMs: 5_000 });
    const second = await discordCursorFile();
    await listening(
      adapterOn(dc, second, new LogSink(), () => 90_000, true, shared),
      inbox,
    );
    await waitFor(() => inbox.kept.has(`dc:${away}`), 10_000);
    expect(inbox.kept.get(`dc:${away}`)).toMatchObject({ chat: { id: beas, type: 'dm' }, sender: { id: bea.id } });
    // 'hello from bea' is inside the window too: read again, and dropped by the inbox as a repeat.
    expect([...inbox.kept.values()].map((m) => m.text)).toEqual(['hello from bea', 'sent while the lease moved']);
    expect(historyReads(dc).some((c) => c.path.endsWith(`/channels/${beas}/messages`))).toBe(true);
    // The second instance keeps the merged list in its own file as well.
    const file = second.replace(/\.cursor$/, '.dm-channels.json');
    await waitFor(async () => ((JSON.parse(await readFile(file, 'utf8').catch(() => '[]')) as string[]).includes(beas) ? true : undefined), 10_000);
  });

  it('a shared list that cannot be read or written (PostgreSQL away) stops nothing: DMs are answered, the local file is kept, one warning each, and a restart catches up from the file', async () => {
    const dc = await withDiscord();
    const path = await discordCursorFile();
    const logs = new LogSink();
    const inbox = new Inbox();
    const beas = snowflake();
    const first = await listening(
      adapterOn(dc, path, logs, () => 90_000, true, unreachable),
      inbox,
    );
    dc.dm('one');
    dc.dm('two', bea, beas);
    dc.dm('three');
    await waitFor(() => inbox.all.length === 3, 10_000);
    await first.stop();
    expect(JSON.parse(await readFile(path.replace(/\.cursor$/, '.dm-channels.json'), 'utf8'))).toEqual([dc.dmChannel, beas]);
    const warned = (start: string) => logs.entries().filter((e) => e.level === 40 && String(e.msg).startsWith(start));
    expect(warned('the Discord DM channels other instances saw could not be read')).toHaveLength(1);
    expect(warned('the Discord DM channels could not be shared with the other instances')).toHaveLength(1);

    const away = dc.whileAway(() => dc.dm('sent while the daemon was down', bea, beas));
    await listening(
      adapterOn(dc, path, logs, () => 90_000, true, unreachable),
      inbox,
    );
    await waitFor(() => inbox.kept.has(`dc:${away}`), 10_000);
  });

  it('writes are coalesced (one in flight, the newest list next) and bounded in time; a failed one is warned once and written again with the next DM; a read that does not answer leaves the list', async () => {
    vi.useFakeTimers();
    onTestFinished(() => void vi.useRealTimers());
    const shared = new MemoryRecord();
    shared.held = true;
    const warnings: string[] = [];
    const dms = new KnownDmChannels(undefined, (_err, what) => warnings.push(what), shared);
    dms.seen('1');
    dms.seen('2');
    dms.seen('3');
    // One in flight; the two changes meanwhile make one write, of the newest list.
    expect(shared.writes).toEqual(['["1"]']);
    shared.release();
    await vi.advanceTimersByTimeAsync(0);
    expect(shared.writes).toEqual(['["1"]', '["3","2","1"]']);
    // That one never answers: given up at the bound, warned, and the list is written again with the next DM.
    await vi.advanceTimersByTimeAsync(SHARED_DM_CHANNELS_TIMEOUT_MS);
    expect(warnings).toEqual([expect.stringMatching(/^the Discord DM channels could not be shared/)]);
    dms.seen('3');
    expect(shared.writes).toEqual(['["1"]', '["3","2","1"]', '["3","2","1"]']);
    shared.release();
    shared.release();
    await dms.flushed();
    expect(shared.ids()).toEqual(['3', '2', '1']);
    // Written again: the same DM writes nothing more.
    dms.seen('3');
    expect(shared.writes).toHaveLength(3);

    // Another instance's list comes first; a read that never answers is given up at the bound.
    shared.value = JSON.stringify(['7', '2']);
    await dms.load(new AbortController().signal);
    expect(dms.ids).toEqual(['7', '2', '3', '1']);
    const hung: SharedRecord = { read: () => new Promise(() => {}), write: () => new Promise(() => {}) };
    const stuck = new KnownDmChannels(undefined, (_err, what) => warnings.push(what), hung);
    const loading = stuck.load(new AbortController().signal);
    await vi.advanceTimersByTimeAsync(SHARED_DM_CHANNELS_TIMEOUT_MS);
    await loading;
    expect(stuck.ids).toEqual([]);
    expect(warnings.at(-1)).toMatch(/^the Discord DM channels other instances saw could not be read/);

    // A listener stopping waits for PostgreSQL SHARED_DM_CHANNELS_TIMEOUT_MS at most, not once per queued write.
    stuck.seen('1');
    stuck.seen('2');
    let flushed = false;
    void stuck.flushed().then(() => (flushed = true));
    await vi.advanceTimersByTimeAsync(SHARED_DM_CHANNELS_TIMEOUT_MS);
    expect(flushed).toBe(true);
  });

  it('an instance whose read of the shared list failed never writes over it unread: its next write reads it first and keeps what the others saw, or is not made', async () => {
    const shared = new MemoryRecord();
    shared.value = JSON.stringify(['7', '8']);
    let readFails = true;
    const flaky: SharedRecord = {
      read: (s) => (readFails ? Promise.reject(new CodedError('CLUSTER_UNAVAILABLE', 'PostgreSQL: timeout')) : shared.read(s)),
      write: (v, s) => shared.write(v, s),
    };
    const warnings: string[] = [];
    const dms = new KnownDmChannels(undefined, (_err, what) => warnings.push(what), flaky);
    await dms.load(new AbortController().signal);
    expect(dms.ids).toEqual([]);
    // Still unreadable: the write is not made (it would leave only this DM for every later holder).
    dms.seen('1');
    await dms.flushed();
    expect(shared.writes).toEqual([]);
    expect(shared.ids()).toEqual(['7', '8']);
    // Readable again: read, merged (this instance's newest first), then written.
    readFails = false;
    dms.seen('2');
    await dms.flushed();
    expect(shared.ids()).toEqual(['2', '1', '7', '8']);
    expect(dms.ids).toEqual(['2', '1', '7', '8']);
  });
});
