import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { FakeDiscord, shardOf } from '../../fakes/discord/server.js';
import { waitFor } from '../../helpers/daemon.js';

/** A raw gateway client: IDENTIFYs as one shard and keeps every frame it receives. */
async function shardClient(dc: FakeDiscord, shard: [number, number]) {
  const ws = new WebSocket(dc.url.replace('http', 'ws'));
  const frames: Array<{ op: number; t?: string; d: any }> = [];
  let closed: number | undefined;
  ws.on('message', (raw) => frames.push(JSON.parse(String(raw)) as (typeof frames)[number]));
  ws.on('close', (code) => (closed = code));
  await new Promise((r) => ws.once('open', r));
  ws.send(JSON.stringify({ op: 2, d: { token: dc.token, intents: 0, properties: {}, shard } }));
  return {
    ws,
    frames,
    closed: () => closed,
    events: (t: string) => frames.filter((f) => f.t === t).map((f) => f.d),
  };
}

describe('the fake Discord gateway shards like Discord', () => {
  let dc: FakeDiscord;
  const sockets: WebSocket[] = [];
  afterEach(async () => {
    for (const ws of sockets) ws.terminate();
    sockets.length = 0;
    await dc.close();
  });

  it("routes each guild's events only to shard (guild_id >> 22) % count, DMs to shard 0, and recommends its shard count", async () => {
    dc = new FakeDiscord();
    await dc.start();
    dc.recommendedShards = 2;
    const g0 = dc.addGuild(0, 2);
    const g1 = dc.addGuild(1, 2);
    expect([shardOf(g0.id, 2), shardOf(g1.id, 2)]).toEqual([0, 1]);
    // The formula on an id built by hand: timestamp 5 (bits 22 and up), low bits ignored.
    const id = String((5n << 22n) | 0x3fffffn);
    expect([shardOf(id, 1), shardOf(id, 2), shardOf(id, 3), shardOf(id, 4)]).toEqual([0, 1, 2, 1]);

    const info = (await (await fetch(`${dc.restApi}/v10/gateway/bot`, { headers: { authorization: `Bot ${dc.token}` } })).json()) as { shards: number };
    expect(info.shards).toBe(2);

    const s0 = await shardClient(dc, [0, 2]);
    const s1 = await shardClient(dc, [1, 2]);
    sockets.push(s0.ws, s1.ws);
    await waitFor(() => s0.events('READY').length === 1 && s1.events('READY').length === 1);
    // READY and GUILD_CREATE carry only the shard's own guilds.
    const onShard = (n: number) => dc.guilds.filter((g) => shardOf(g.id, 2) === n).map((g) => g.id);
    expect(s0.events('READY')[0].shard).toEqual([0, 2]);
    expect(s0.events('READY')[0].guilds.map((g: { id: string }) => g.id)).toEqual(onShard(0));
    expect(s1.events('GUILD_CREATE').map((g: { id: string }) => g.id)).toEqual(onShard(1));
    expect(dc.sessions.map((s) => s.shard)).toEqual([
      [0, 2],
      [1, 2],
    ]);

    const m0 = dc.guildMessage('to shard 0', { guild: g0 });
    const m1 = dc.guildMessage('to shard 1', { guild: g1 });
    const dm = dc.dm('a DM');
    await waitFor(() => s0.events('MESSAGE_CREATE').length === 2 && s1.events('MESSAGE_CREATE').length === 1);
    expect(s0.events('MESSAGE_CREATE').map((m) => m.id)).toEqual([m0, dm]);
    expect(s1.events('MESSAGE_CREATE').map((m) => m.id)).toEqual([m1]);
    expect(s1.events('MESSAGE_CREATE')[0].guild_id).toBe(g1.id);
  });

  it('closes an IDENTIFY for a shard outside [0, count) with 4010, and refuses to dispatch to a shard nobody opened', async () => {
    dc = new FakeDiscord();
    await dc.start();
    const bad = await shardClient(dc, [2, 2]);
    sockets.push(bad.ws);
    await waitFor(() => bad.closed() !== undefined);
    expect(bad.closed()).toBe(4010);
    const s0 = await shardClient(dc, [0, 2]);
    sockets.push(s0.ws);
    await waitFor(() => s0.events('READY').length === 1);
    expect(() => dc.guildMessage('nobody listens', { guild: dc.addGuild(1, 2) })).toThrow(/no gateway session yet/);
  });
});
