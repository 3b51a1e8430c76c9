import { beforeEach, describe, expect, it } from 'vitest';
import type { FakeDiscord } from '../fakes/discord/server.js';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import { withChannelDaemon } from '../helpers/fixtures.js';
import { discordChannel, discordEnv, withDiscord } from '../helpers/platforms.js';
import { echoAgent as echo } from '../helpers/toml.js';

describe('a Discord channel with shards = 2 on one node', () => {
  let dc: FakeDiscord;
  let d: TestDaemon | undefined;
  beforeEach(async () => {
    dc = await withDiscord();
    dc.recommendedShards = 2;
    // Both shards may identify at once (shard ids 0 and 1 fall in different rate-limit buckets).
    dc.maxConcurrency = 2;
  });

  it('runs both shards in this process and answers guilds on each shard and DMs', async () => {
    const g0 = dc.addGuild(0, 2);
    const g1 = dc.addGuild(1, 2);
    d = await withChannelDaemon(echo(0) + discordChannel(dc, 'shards = 2\n'), discordEnv(dc));
    await waitFor(() => dc.shardConnected(0) && dc.shardConnected(1) && d!.daemon.status().channels[0]!.state === 'connected', 15_000);
    expect(dc.sessions.map((s) => s.shard).sort()).toEqual([
      [0, 2],
      [1, 2],
    ]);
    dc.guildMessage('hello shard zero', { guild: g0, mention: true });
    dc.guildMessage('hello shard one', { guild: g1, mention: true });
    dc.dm('hello from a DM');
    await waitFor(
      () => dc.texts(g0.channel)[0] === 'hello shard zero' && dc.texts(g1.channel)[0] === 'hello shard one' && dc.texts(dc.dmChannel)[0] === 'hello from a DM',
      10_000,
    );
    // One gateway session per shard, each answered once.
    expect(dc.gateway.identifies).toBe(2);
    expect([dc.texts(g0.channel), dc.texts(g1.channel), dc.texts(dc.dmChannel)].map((t) => t.length)).toEqual([1, 1, 1]);
  });
});
