import { beforeEach, describe, expect, it } from 'vitest';
import { STOP_MARKER } from '../../src/stream/reply-stream.js';
import type { FakeTelegram } from '../fakes/telegram/server.js';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import { withChannelDaemon, withLlm } from '../helpers/fixtures.js';
import { telegramChannel, telegramEnv, withTelegram } from '../helpers/platforms.js';
import { echoAgent as echo, llmAgent } from '../helpers/toml.js';
import { ChatClient } from '../helpers/webchat-client.js';

const words = (n: number) => Array.from({ length: n }, (_, i) => `word${i}`).join(' ');

describe('Telegram channel against the fake Bot API', () => {
  let tg: FakeTelegram;
  let d: TestDaemon | undefined;
  beforeEach(async () => {
    tg = await withTelegram();
  });

  const channel = (extra = '') => telegramChannel(tg, extra);
  const start = async (body: string, env: NodeJS.ProcessEnv = {}) => (d = await withChannelDaemon(body, { ...telegramEnv(tg), ...env }));

  it('a DM streams as draft edits and ends with the full text', async () => {
    await start(echo(120) + channel());
    const text = words(15);
    tg.dm(text);
    await waitFor(() => tg.texts(42)[0] === text, 10_000);
    const [msg] = tg.messages;
    expect(msg!.edits).toBeGreaterThanOrEqual(1);
    expect(tg.callsOf('sendMessage')).toHaveLength(1);
    // The offset moved past the update only after it was stored.
    await waitFor(() => tg.pendingUpdates === 0);
  });

  it('with native drafts, a DM streams through sendMessageDraft and ends with one real message', async () => {
    await start(echo(120) + channel().replace('native_drafts = false', 'native_drafts = true'));
    const text = words(12);
    tg.dm(text);
    await waitFor(() => tg.texts(42)[0] === text, 10_000);
    expect(tg.drafts.length).toBeGreaterThanOrEqual(1);
    expect(new Set(tg.drafts.map((x) => x.draftId)).size).toBe(1);
    expect(tg.callsOf('editMessageText')).toHaveLength(0);
  });

  it('in groups: unaddressed messages are ignored; a mention is answered as a reply in its topic', async () => {
    await start(echo(0) + channel());
    tg.group('just chatting', { topic: 7 });
    const mention = tg.group('hello bot', { mention: true, topic: 7 });
    await waitFor(() => tg.texts(-1001234)[0] === `@${tg.bot.username} hello bot`, 5000);
    const [reply] = tg.messages;
    expect(reply).toMatchObject({ chatId: -1001234, threadId: 7, replyTo: mention.message.message_id });
    // The unaddressed message was seen and judged (kept as context, no turn): nothing else will answer it.
    await waitFor(() => d!.logs.entries().some((l) => l.msg === 'message received' && l.verdict === 'unaddressed'));
    expect(tg.messages).toHaveLength(1);
    expect((await d!.daemon.metrics.received.get()).values.map((v) => v.value)).toEqual([1]);
  });

  it('a reply to the bot counts as addressed', async () => {
    await start(echo(0) + channel());
    tg.group('answer me', { replyTo: 5 });
    await waitFor(() => tg.texts(-1001234)[0] === 'answer me', 5000);
  });

  it('/stop mid-stream gives one visible result: the answer with the marker; /help lists the commands', async () => {
    await start(echo(150) + channel());
    tg.dm(words(40));
    await waitFor(() => tg.messages.length === 1, 5000);
    tg.dm('/stop');
    await waitFor(() => tg.texts(42)[0]!.endsWith(STOP_MARKER), 5000);
    await waitFor(() => d!.daemon.status().turns.in_flight === 0, 5000);
    expect(tg.texts(42)).toHaveLength(1);
    tg.dm('/help');
    await waitFor(() => tg.texts(42).some((t) => t.startsWith('Commands:')), 5000);
    expect(tg.texts(42).find((t) => t.startsWith('Commands:'))).toContain('/stop');
  });

  it('401 parks the channel as failed in /status while a web chat keeps answering', async () => {
    await start(`${echo(0)}${channel()}\n[[channels]]\nid = "web"\ntype = "webchat"\n`, { TG_TOKEN: 'wrong:token' });
    const st = (await (await fetch(`${d!.url}/status`)).json()) as {
      channels: Array<{ id: string; state: string; last_error: { code: string; message: string } }>;
    };
    // Parked: no retry is scheduled (next_retry_at null), and the one attempt asked getMe once.
    expect(st.channels.find((c) => c.id === 'tg')).toMatchObject({
      state: 'failed',
      next_retry_at: null,
      last_error: { code: 'CHANNEL_AUTH_FAILED', message: expect.stringContaining('token was refused') },
    });
    expect(tg.callsOf('getMe')).toHaveLength(1);
    const c = new ChatClient(d!.url, 'tab');
    await c.opened;
    c.send('still here');
    expect((await c.finals())[0]!.text).toBe('still here');
    c.close();
    expect(tg.callsOf('getMe')).toHaveLength(1);
  });

  it('409 (another poller) is fatal with a message saying so', async () => {
    tg.fail('getUpdates', { status: 409 });
    await start(echo(0) + channel());
    await waitFor(() => d!.daemon.status().channels[0]!.state === 'failed', 5000);
    expect(d!.daemon.status().channels[0]!.last_error).toMatchObject({
      code: 'CHANNEL_CONFLICT',
      message: expect.stringContaining('another process is polling this bot'),
    });
  });

  it('429 on edits: no request storm, and the final text lands', async () => {
    await start(echo(40) + channel());
    tg.fail('editMessageText', { status: 429, retryAfter: 2 }, 2);
    const text = words(60);
    tg.dm(text);
    await waitFor(() => tg.texts(42)[0] === text, 20_000);
    // No storm, however long the writing took on this machine: every request (the 429'd ones
    // included) went at least the 1 s floor after the one before, and the two 429s were waited out.
    const requests = [...tg.callsOf('sendMessage'), ...tg.callsOf('editMessageText')].sort((a, b) => a.at - b.at);
    expect(requests.length).toBeGreaterThanOrEqual(4);
    for (let i = 1; i < requests.length; i++) expect(requests[i]!.at - requests[i - 1]!.at).toBeGreaterThanOrEqual(1000);
    expect((await d!.daemon.metrics.rateLimited.get()).values.map((v) => v.value)).toEqual([2]);
  });

  it('a 5000-character answer arrives as two messages with intact code blocks', async () => {
    const llm = await withLlm();
    const code = Array.from({ length: 150 }, (_, i) => `console.log("line ${i} of the example");`).join('\n');
    const answer = `Here is the script.\n\n\`\`\`js\n${code}\n\`\`\`\n\nThat is all.`;
    expect(answer.length).toBeGreaterThan(5000);
    // The first piece takes a while: the chat shows "typing" meanwhile.
    llm.script({ kind: 'stream', chunks: answer.match(/[\s\S]{1,400}/g)!.map((content, i) => ({ content, delayMs: i === 0 ? 600 : 0 })) });
    await start(llmAgent(llm.url) + channel());
    tg.dm('write me a long script');
    await waitFor(() => tg.messages.length === 2 && tg.texts(42).join('').includes('That is all.'), 15_000);
    const html = tg.messages.map((m) => m.text);
    for (const h of html) {
      expect(h.split('<pre>').length).toBe(h.split('</pre>').length);
      expect(h.length).toBeLessThan(4096 + 200);
    }
    expect(html[0]).toContain('<pre><code class="language-js">');
    expect(tg.callsOf('sendChatAction').length).toBeGreaterThanOrEqual(1);
    expect(html[1]).toMatch(/^<pre><code class="language-js">/);
    const visible = tg.texts(42).join('\n');
    for (let i = 0; i < 150; i++) expect(visible).toContain(`console.log("line ${i} of the example");`);
  });

  describe('webhook mode', () => {
    const webhook = () => channel('mode = "webhook"\npublic_url = "https://bot.example.org"\nwebhook_secret_env = "TG_SECRET"\n');
    const update = (id: number, text: string) => ({
      update_id: id,
      message: { message_id: id, date: 1, chat: { id: 42, type: 'private', first_name: 'Ada' }, from: { id: 42, is_bot: false, first_name: 'Ada' }, text },
    });

    it('sets the webhook with the secret; a valid secret is answered', async () => {
      await start(echo(0) + webhook(), { TG_SECRET: 'hook-secret-123' });
      expect(tg.webhook).toEqual({ url: 'https://bot.example.org/webhooks/tg', secret: 'hook-secret-123' });
      const res = await fetch(`${d!.url}/webhooks/tg`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': 'hook-secret-123' },
        body: JSON.stringify(update(1, 'via webhook')),
      });
      expect(res.status).toBe(200);
      await waitFor(() => tg.texts(42)[0] === 'via webhook', 5000);
    });

    it('a malformed update with the right secret (null, {"message":{}}) gets 200 and is dropped with one debug line', async () => {
      await start(echo(0) + webhook(), { TG_SECRET: 'hook-secret-123' });
      for (const body of ['null', '{"update_id":7,"message":{}}']) {
        const res = await fetch(`${d!.url}/webhooks/tg`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': 'hook-secret-123' },
          body,
        });
        expect(res.status, body).toBe(200);
      }
      expect(d!.logs.lines.filter((l) => l.includes('malformed Telegram update'))).toHaveLength(2);
      expect(d!.logs.text).not.toMatch(/HTTP handler failed|TypeError/);
      // The channel still answers.
      const res = await fetch(`${d!.url}/webhooks/tg`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': 'hook-secret-123' },
        body: JSON.stringify(update(3, 'still here')),
      });
      expect(res.status).toBe(200);
      await waitFor(() => tg.texts(42)[0] === 'still here', 5000);
    });

    it('a wrong or missing secret gets 401 and nothing is stored', async () => {
      await start(echo(0) + webhook(), { TG_SECRET: 'hook-secret-123' });
      const attempts: Array<Record<string, string>> = [{ 'x-telegram-bot-api-secret-token': 'nope' }, {}];
      for (const headers of attempts) {
        const res = await fetch(`${d!.url}/webhooks/tg`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
          body: JSON.stringify(update(2, 'sneaky')),
        });
        expect(res.status).toBe(401);
      }
      // A valid update after them is stored and answered; it is the only one.
      const ok = await fetch(`${d!.url}/webhooks/tg`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': 'hook-secret-123' },
        body: JSON.stringify(update(3, 'the real one')),
      });
      expect(ok.status).toBe(200);
      await waitFor(() => tg.texts(42)[0] === 'the real one');
      expect(tg.texts(42)).toEqual(['the real one']);
      expect((await d!.daemon.metrics.received.get()).values.map((v) => v.value)).toEqual([1]);
    });
  });
});
