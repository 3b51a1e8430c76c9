import { describe, expect, it, onTestFinished } from 'vitest';
import { DiscordAdapter } from '../../../channels/discord/adapter.js';
import type { ChannelMessage } from '../../../src/contracts/message.js';
import { createLogger } from '../../../src/observe/logger.js';
import { snowflake } from '../../fakes/discord/server.js';
import { waitFor } from '../../helpers/daemon.js';
import { withDiscord } from '../../helpers/platforms.js';

const GUILD_AUTHORS = 300;
const DM_USERS = 60;

describe('discord.js caches under a flood of gateway events', () => {
  it('stay bounded (messages, users, members, DM channels), while threads, DMs, replies and button clicks still work', async () => {
    const dc = await withDiscord();
    const adapter = new DiscordAdapter({ id: 'dc', restApi: dc.restApi, guilds: [], log: createLogger({ level: 'silent' }) }, dc.token);
    const stop = new AbortController();
    const got: ChannelMessage[] = [];
    let connected = false;
    const listening = adapter.listen(
      async (m) => {
        got.push(m);
        return true;
      },
      stop.signal,
      () => (connected = true),
    );
    onTestFinished(async () => {
      stop.abort();
      await listening.catch(() => {});
    });
    await waitFor(() => connected, 10_000);

    // A spam wave: every guild message from another member, every DM from another user in a DM channel of their own.
    for (let i = 0; i < GUILD_AUTHORS; i++)
      dc.guildMessage(`spam ${i}`, { thread: i % 3 === 0 ? 1 : undefined, author: { id: snowflake(), username: `u${i}` } });
    for (let i = 0; i < DM_USERS; i++) dc.dm(`dm ${i}`, { id: snowflake(), username: `d${i}` }, snowflake());
    await waitFor(() => got.length === GUILD_AUTHORS + DM_USERS, 10_000);

    const sizes = adapter.cacheSizes()!;
    // The guild, its text channel and both threads stay: a message's thread and parent come from them.
    expect(sizes).toMatchObject({ guilds: 1, threads: 2, channels: 3, dmChannels: 0, messages: 0, members: 0, presences: 0 });
    // Only the bot's own user is kept.
    expect(sizes.users).toBe(1);

    // Normal traffic afterwards: a thread mention keeps its thread and parent, a DM is a DM.
    got.length = 0;
    const inThread = dc.guildMessage('in the thread', { thread: 2, mention: true, author: { id: snowflake() } });
    const dmId = dc.dm('hello', { id: snowflake() }, snowflake());
    await waitFor(() => got.length === 2, 10_000);
    expect(got.find((m) => m.messageId === inThread)).toMatchObject({
      chat: { id: dc.guild.channel, type: 'group' },
      threadId: dc.guild.thread2,
      addressed: true,
      text: 'in the thread',
    });
    const dm = got.find((m) => m.messageId === dmId)!;
    expect(dm).toMatchObject({ chat: { type: 'dm' }, addressed: true });

    // A reply with a button in that (no longer cached) DM channel, and a click on it.
    const ref = await adapter.send({ channelId: 'dc', chatId: dm.chat.id, chatType: 'dm', replyToMessageId: dmId }, 'Approve?', {
      signal: stop.signal,
      buttons: [{ label: 'Yes', data: 'yes' }],
    });
    expect(dc.texts(dm.chat.id)).toEqual(['Approve?']);
    got.length = 0;
    dc.click(dc.messages.find((m) => m.id === ref.messageId)!, 'Yes', { id: snowflake() });
    await waitFor(() => got.length === 1 && dc.interactionCallbacks.length === 1, 10_000);
    expect(got[0]).toMatchObject({ text: 'yes', chat: { id: dm.chat.id, type: 'dm' }, replyTo: ref.messageId });
    expect(adapter.cacheSizes()).toMatchObject({ dmChannels: 0, messages: 0, users: 1, members: 0 });
  });
});
