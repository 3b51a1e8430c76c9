import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { type FakeDiscord, type FakeGuild, snowflake } from '../fakes/discord/server.js';
import { waitFor } from '../helpers/daemon.js';
import { DaemonProcess, writeProcessConfig } from '../helpers/process.js';
import { withDiscord } from '../helpers/platforms.js';
import { scaled } from '../helpers/timing.js';
import { clusterEnv, clusterSkipReason, clusterToml, dropNamespace, PG_URL, uniqueNamespace } from '../helpers/cluster.js';
import type { ClusterStatusJson } from './harness.js';

const skip = await clusterSkipReason();
const TTL_MS = 2000;

describe.skipIf(skip !== undefined)(`cluster mode, a Discord bot over two processes${skip ? ` (skipped: ${skip})` : ''}`, () => {
  const procs: DaemonProcess[] = [];
  const dirs: string[] = [];
  let ns: string | undefined;
  afterEach(async () => {
    for (const p of procs) p.child.kill('SIGKILL');
    await Promise.all(procs.map((p) => p.exited));
    procs.length = 0;
    if (ns) await dropNamespace(ns);
    ns = undefined;
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  const instance = async (dc: FakeDiscord, id: string, shards = 2) => {
    const dir = mkdtempSync(join(tmpdir(), `channeld-shards-${id}-`));
    dirs.push(dir);
    const file = writeProcessConfig(
      dir,
      clusterToml(ns!, `instance_id = "${id}"\nlease_ttl_ms = ${TTL_MS}\npartitions = 4\n`) +
        `[agent]\nprovider = "echo"\necho_delay_ms = 0\n\n[[channels]]\nid = "dc"\ntype = "discord"\ntoken_env = "DC_TOKEN"\nrest_api = "${dc.restApi}"\nallow_from = ["*"]\n${shards > 1 ? `shards = ${shards}\n` : ''}`,
    );
    const proc = new DaemonProcess(file, { DC_TOKEN: dc.token, ...clusterEnv });
    procs.push(proc);
    return { id, proc, url: await proc.url(60_000) };
  };
  const status = async (url: string) => (await (await fetch(`${url}/status`)).json()) as ClusterStatusJson;
  /** The owner of shard `shard`'s lease, or of the whole listener's (an unsharded bot). */
  const ownerOf = (s: ClusterStatusJson, shard?: number) =>
    s.cluster.leases.find((l) => l.key === `listener.dc${shard === undefined ? '' : `.${shard}`}` && !l.expired)?.owner;
  /** The DM channels the instances share for channel "dc" (ChannelContext.sharedRecord), as PostgreSQL holds them. */
  const sharedDmChannels = async (): Promise<string[]> => {
    const client = new pg.Client({ connectionString: PG_URL });
    await client.connect();
    try {
      const { rows } = await client.query<{ value: string }>(
        `SELECT value FROM ${ns}.channel_records WHERE namespace = $1 AND channel_id = 'dc' AND name = 'dm-channels'`,
        [ns],
      );
      return rows[0] ? (JSON.parse(rows[0].value) as string[]) : [];
    } finally {
      await client.end();
    }
  };

  it('2 gateway shards: each shard is leased on its own and they spread over the instances; kill -9 of one, the other takes its shard within the lease bound and answers its guild', async () => {
    ns = uniqueNamespace();
    const dc = await withDiscord();
    dc.recommendedShards = 2;
    dc.maxConcurrency = 2;
    const guilds: FakeGuild[] = [dc.addGuild(0, 2), dc.addGuild(1, 2)];
    const a = await instance(dc, 'sa');
    const b = await instance(dc, 'sb');

    // Both shards leased, one per instance (the first to start hands its surplus back), both connected.
    const spread = await waitFor(
      async () => {
        const s = await status(a.url).catch(() => undefined);
        const owners = s ? [ownerOf(s, 0), ownerOf(s, 1)] : [];
        return owners.every(Boolean) && new Set(owners).size === 2 && dc.shardConnected(0) && dc.shardConnected(1) ? owners : undefined;
      },
      scaled(30_000),
      100,
    );
    expect([...spread].sort()).toEqual(['sa', 'sb']);
    // /status on either instance names every shard's owner; the channel is connected on both.
    const seenByB = await status(b.url);
    expect([ownerOf(seenByB, 0), ownerOf(seenByB, 1)]).toEqual(spread);
    expect(seenByB.channels.find((c) => c.id === 'dc')?.state).toBe('connected');

    for (const [i, g] of guilds.entries()) dc.guildMessage(`before, shard ${i}`, { guild: g, mention: true });
    await waitFor(() => guilds.every((g, i) => dc.texts(g.channel)[0] === `before, shard ${i}`), scaled(10_000));

    // kill -9 the owner of shard 1: its lease expires and the survivor takes the shard.
    const [victim, survivor] = spread[1] === 'sa' ? [a, b] : [b, a];
    const killedAt = Date.now();
    victim.proc.child.kill('SIGKILL');
    await victim.proc.exited;
    // The lease bound: the TTL, plus a step of the waiting loop and its jitter (2 x TTL / 5), plus the IDENTIFY.
    const reopened = await waitFor(() => dc.sessions.find((s) => s.shard[0] === 1 && s.at > killedAt && dc.shardConnected(1)), scaled(TTL_MS * 2 + 5000), 20);
    expect(reopened.shard).toEqual([1, 2]);
    const after = await status(survivor.url);
    expect([ownerOf(after, 0), ownerOf(after, 1)]).toEqual([survivor.id, survivor.id]);

    for (const [i, g] of guilds.entries()) dc.guildMessage(`after, shard ${i}`, { guild: g, mention: true });
    await waitFor(() => guilds.every((g, i) => dc.texts(g.channel)[1] === `after, shard ${i}`), scaled(10_000));
    // Each message answered once.
    expect(guilds.map((g) => dc.texts(g.channel))).toEqual([
      ['before, shard 0', 'after, shard 0'],
      ['before, shard 1', 'after, shard 1'],
    ]);
  });

  /**
   * Discord replays nothing to a new session, so what was sent between the kill and the new
   * holder's READY is found only by its catch-up, which with no cursor of its own reads the
   * shared inbox's duplicate window back (ChannelContext.listenerMoves); what the killed
   * holder answered inside that window is recognised and not answered again.
   */
  it('one listener, kill -9 of its holder, taken over by an instance that never ran it (no cursor): the message sent before the new session is answered once, and the one answered before is not answered again', async () => {
    ns = uniqueNamespace();
    const dc = await withDiscord();
    const a = await instance(dc, 'ta', 1);
    await waitFor(
      async () => {
        const s = await status(a.url).catch(() => undefined);
        return s !== undefined && ownerOf(s) === 'ta' && dc.shardConnected(0);
      },
      scaled(30_000),
      100,
    );
    const b = await instance(dc, 'tb', 1);
    // b's lease table fills from its watch of the leases: ta's may not be in it the moment b is up.
    await waitFor(async () => ownerOf(await status(b.url)) === 'ta', scaled(10_000), 50);

    dc.guildMessage('before the kill', { mention: true });
    await waitFor(() => dc.texts(dc.guild.channel).length === 1, scaled(10_000));

    const killedAt = Date.now();
    a.proc.child.kill('SIGKILL');
    await a.proc.exited;
    // No session is open: Discord keeps it in the channel's history, and a new session gets no replay.
    dc.guildMessage('sent while the lease moved', { mention: true });
    await waitFor(() => dc.sessions.find((s) => s.at > killedAt && dc.shardConnected(0)), scaled(TTL_MS * 2 + 5000), 20);
    await waitFor(async () => ownerOf(await status(b.url)) === 'tb', scaled(10_000), 50);
    await waitFor(() => dc.texts(dc.guild.channel).length >= 2, scaled(15_000));
    dc.guildMessage('live', { mention: true });
    await waitFor(() => dc.texts(dc.guild.channel).length >= 3, scaled(10_000));
    expect(dc.texts(dc.guild.channel)).toEqual(['before the kill', 'sent while the lease moved', 'live']);
  });

  /**
   * Discord lists no bot's DM channels, so a catch-up reads the ones messages came from. Kept
   * only in the killed holder's state_dir, a DM channel the new holder never saw was not read:
   * the list is shared through PostgreSQL (ChannelContext.sharedRecord), read as the new holder's run starts.
   */
  it('one listener, kill -9 of its holder: a DM sent while the lease moved, in a DM channel only the killed holder saw, is answered once', async () => {
    ns = uniqueNamespace();
    const dc = await withDiscord();
    const a = await instance(dc, 'ua', 1);
    await waitFor(
      async () => {
        const s = await status(a.url).catch(() => undefined);
        return s !== undefined && ownerOf(s) === 'ua' && dc.shardConnected(0);
      },
      scaled(30_000),
      100,
    );
    const b = await instance(dc, 'ub', 1);
    await waitFor(async () => ownerOf(await status(b.url)) === 'ua', scaled(10_000), 50);

    // Bea's DM channel: only ua ever gets a message from it before the kill.
    const bea = { id: '515151515151515151', username: 'bea' };
    const beas = snowflake();
    dc.dm('hello from bea', bea, beas);
    await waitFor(() => dc.texts(beas).length === 1, scaled(10_000));
    // ua shared it before answering; waited for here so the kill cannot come first.
    await waitFor(async () => (await sharedDmChannels()).includes(beas), scaled(10_000), 50);

    const killedAt = Date.now();
    a.proc.child.kill('SIGKILL');
    await a.proc.exited;
    dc.dm('sent while the lease moved', bea, beas);
    await waitFor(() => dc.sessions.find((s) => s.at > killedAt && dc.shardConnected(0)), scaled(TTL_MS * 2 + 5000), 20);
    await waitFor(async () => ownerOf(await status(b.url)) === 'ub', scaled(10_000), 50);
    await waitFor(() => dc.texts(beas).length >= 2, scaled(15_000));
    dc.dm('live', bea, beas);
    await waitFor(() => dc.texts(beas).length >= 3, scaled(10_000));
    expect(dc.texts(beas)).toEqual(['hello from bea', 'sent while the lease moved', 'live']);
  });
});
