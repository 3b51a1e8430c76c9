import { beforeEach, describe, expect, it } from 'vitest';
import { DiscordAdapter } from '../../channels/discord/adapter.js';
import { createLogger } from '../../src/observe/logger.js';
import { STOP_MARKER } from '../../src/stream/reply-stream.js';
import { LogSink } from '../helpers/daemon.js';
import { openFenceAt } from '../../src/util/chunk.js';
import type { FakeDiscord } from '../fakes/discord/server.js';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import { withChannelDaemon, withLlm } from '../helpers/fixtures.js';
import { discordChannel, discordEnv, withDiscord } from '../helpers/platforms.js';
import { echoAgent as echo, llmAgent } from '../helpers/toml.js';

const words = (n: number, p = 'w') => Array.from({ length: n }, (_, i) => `${p}${i}`).join(' ');

describe('Discord channel against the fake gateway and REST API', () => {
  let dc: FakeDiscord;
  let d: TestDaemon | undefined;
  beforeEach(async () => {
    dc = await withDiscord();
  });

  const channel = () => discordChannel(dc);
  const start = async (body: string, token = dc.token) => (d = await withChannelDaemon(body, discordEnv(dc, token)));
  const state = () => d!.daemon.status().channels.find((c) => c.id === 'dc')!;

  it('a guild mention and a DM each stream and finish; unaddressed guild messages are ignored', async () => {
    await start(echo(150) + channel());
    dc.guildMessage('nobody asked me');
    const mentionId = dc.guildMessage(words(12, 'g'), { mention: true });
    dc.dm(words(12, 'd'));
    await waitFor(() => dc.texts(dc.guild.channel)[0] === words(12, 'g') && dc.texts(dc.dmChannel)[0] === words(12, 'd'), 10_000);
    const guildReply = dc.messages.find((m) => m.channelId === dc.guild.channel)!;
    expect(guildReply.reference).toBe(mentionId);
    expect(guildReply.edits).toBeGreaterThanOrEqual(1);
    expect(dc.texts(dc.guild.channel)).toHaveLength(1);
  });

  it('op 7 mid-conversation: the client resumes, nothing is lost or answered twice', async () => {
    await start(echo(0) + channel());
    dc.dm('before the reconnect');
    await waitFor(() => dc.texts(dc.dmChannel).length === 1, 5000);
    dc.requestReconnect();
    // Sent while the client is away: the fake keeps it and replays it on RESUME.
    await waitFor(() => !dc.connected, 5000);
    dc.dm('during the reconnect');
    await waitFor(() => dc.gateway.resumes === 1 && dc.connected, 10_000);
    dc.dm('after the reconnect');
    // One more message after them: the gateway is ordered and the conversation's lane is FIFO,
    // so once it is answered every earlier frame (a replayed one included) has been handled.
    dc.dm('last one');
    const expected = ['before the reconnect', 'during the reconnect', 'after the reconnect', 'last one'];
    await waitFor(() => dc.texts(dc.dmChannel).length === expected.length && dc.texts(dc.dmChannel)[3] === 'last one', 10_000);
    expect(dc.texts(dc.dmChannel)).toEqual(expected);
    expect(dc.gateway.identifies).toBe(1);
    expect(state()).toMatchObject({ state: 'connected' });
    expect(state().connection).toBeGreaterThanOrEqual(2);
  });

  it('close 4004 parks the channel as failed with the bad-token message', async () => {
    await start(echo(0) + channel(), `${dc.token}-wrong`);
    await waitFor(() => state().state === 'failed', 10_000);
    expect(state().last_error).toMatchObject({ code: expect.stringMatching(/CHANNEL_AUTH_FAILED/), message: expect.stringMatching(/token/) });
  });

  it('close 4014 parks the channel as failed with the intents message', async () => {
    dc.identifyCloseCode = 4014;
    await start(echo(0) + channel());
    await waitFor(() => state().state === 'failed', 10_000);
    // Parked: no retry is scheduled, and the one attempt identified once (no reconnect loop inside discord.js).
    expect(state()).toMatchObject({
      next_retry_at: null,
      last_error: { code: 'CHANNEL_FORBIDDEN', message: expect.stringContaining('Message Content Intent') },
    });
    expect(dc.gateway.identifies).toBe(1);
  });

  it('429 on edits: no storm, and the final text lands', async () => {
    await start(echo(40) + channel());
    dc.fail('PATCH message', { status: 429, retryAfter: 1.5 }, 2);
    const text = words(60);
    dc.dm(text);
    await waitFor(() => dc.texts(dc.dmChannel)[0] === text, 20_000);
    // No storm, however long the writing took on this machine: every message request (the
    // 429'd ones included) went at least the 1 s floor after the one before.
    const requests = [...dc.restCalls('POST', 'message'), ...dc.restCalls('PATCH', 'message')].sort((a, b) => a.at - b.at);
    expect(requests.length).toBeGreaterThanOrEqual(3);
    for (let i = 1; i < requests.length; i++) expect(requests[i]!.at - requests[i - 1]!.at).toBeGreaterThanOrEqual(1000);
  });

  it('model output with @everyone and <@123> is sent with mentions disabled', async () => {
    await start(echo(0) + channel());
    dc.dm('@everyone look at <@123456789012345678> and <@&987654321098765432>');
    await waitFor(() => dc.messages.length === 1 && dc.messages[0]!.content.includes('<@&'), 5000);
    for (const m of dc.messages) expect(m.allowedMentions).toEqual({ parse: [], replied_user: false });
    for (const c of dc.rest.filter((c) => c.method !== 'GET' && c.body)) expect(c.body!.allowed_mentions).toEqual({ parse: [], replied_user: false });
  });

  it('/stop in one thread leaves another thread streaming', async () => {
    await start(echo(120) + channel());
    dc.guildMessage(words(30, 'a'), { thread: 1, mention: true });
    dc.guildMessage(words(30, 'b'), { thread: 2, mention: true });
    await waitFor(() => dc.texts(dc.guild.thread).length > 0 && dc.texts(dc.guild.thread2).length > 0, 10_000);
    dc.guildMessage('/stop', { thread: 1, mention: true });
    await waitFor(() => dc.texts(dc.guild.thread2)[0] === words(30, 'b'), 15_000);
    const t1 = dc.texts(dc.guild.thread);
    expect(t1[0]!.endsWith(STOP_MARKER)).toBe(true);
    // One visible result: the answer with the marker, no separate reply.
    expect(t1).toHaveLength(1);
  });

  it('a reply sent again with the same idempotency key (a re-run after a crash) is one message', async () => {
    const adapter = new DiscordAdapter(
      { id: 'dc', restApi: dc.restApi, guilds: [], log: createLogger({ level: 'warn', destination: new LogSink() }) },
      dc.token,
    );
    const target = { channelId: 'dc', chatId: dc.dmChannel, chatType: 'dm' as const };
    const first = await adapter.send(target, 'the answer', { signal: new AbortController().signal, idempotencyKey: '1234567890123456789:0' });
    const again = await adapter.send(target, 'the answer', { signal: new AbortController().signal, idempotencyKey: '1234567890123456789:0' });
    const other = await adapter.send(target, 'next chunk', { signal: new AbortController().signal, idempotencyKey: '1234567890123456789:1' });
    expect(again.messageId).toBe(first.messageId);
    expect(other.messageId).not.toBe(first.messageId);
    expect(dc.texts(dc.dmChannel)).toEqual(['the answer', 'next chunk']);
    expect(dc.restCalls('POST', 'message').every((c) => c.body!.enforce_nonce === true && String(c.body!.nonce).length <= 25)).toBe(true);
  });

  it('a 4500-character answer is three messages with intact code blocks', async () => {
    const llm = await withLlm();
    const code = Array.from({ length: 120 }, (_, i) => `value_${i} = compute_the_thing(${i}) + 1`).join('\n');
    const answer = `Result:\n\n\`\`\`python\n${code}\n\`\`\`\nDone.`;
    expect(answer.length).toBeGreaterThan(2 * 2000);
    expect(answer.length).toBeLessThan(3 * 2000 - 100);
    // The first piece takes a while: the channel shows "typing" meanwhile.
    llm.script({ kind: 'stream', chunks: answer.match(/[\s\S]{1,500}/g)!.map((content, i) => ({ content, delayMs: i === 0 ? 600 : 0 })) });
    await start(llmAgent(llm.url) + channel());
    dc.dm('write it');
    await waitFor(() => dc.texts(dc.dmChannel).join('').includes('Done.'), 15_000);
    const parts = dc.texts(dc.dmChannel);
    expect(parts).toHaveLength(3);
    for (const p of parts) {
      expect(p.length).toBeLessThanOrEqual(2000);
      expect(openFenceAt(p)).toBeUndefined();
    }
    expect(parts[1]!.startsWith('```python\n')).toBe(true);
    expect(dc.restCalls('POST', 'typing').length).toBeGreaterThanOrEqual(1);
    for (let i = 0; i < 120; i++) expect(parts.join('\n')).toContain(`value_${i} = compute_the_thing(${i}) + 1`);
  });
});
