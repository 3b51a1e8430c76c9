import { getEventListeners } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { GrammyError, HttpError } from 'grammy';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classifyTelegramError } from '../../../channels/telegram/errors.js';
import { HotBotApi } from '../../../channels/telegram/hot-api.js';

// A real HTTP server answering as the Bot API would, on its root and behind a path prefix.
let server: Server;
let root: string;
const clients: HotBotApi[] = [];
const hanging = new Set<() => void>();
/** The path of each request the server saw. */
const paths: string[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    paths.push(req.url!);
    req.on('data', (c: Buffer) => (body += c));
    req.on('end', () => {
      // The chat id picks the answer: 429 a rate limit, 502 a proxy's page, 0 none at all,
      // 413 an answer larger than any message, 204 JSON that is not an object.
      const payload = JSON.parse(body) as { chat_id: number };
      const json = (status: number, value: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
      if (payload.chat_id === 429) return json(429, { ok: false, error_code: 429, description: 'Too Many Requests', parameters: { retry_after: 3 } });
      if (payload.chat_id === 502) return res.writeHead(502, { 'content-type': 'text/html' }).end('<html>bad gateway</html>');
      if (payload.chat_id === 0) return hanging.add(() => res.destroy());
      if (payload.chat_id === 413) return json(200, { ok: true, result: { message_id: 1, text: 'x'.repeat(2 * 1024 * 1024) } });
      if (payload.chat_id === 204) return json(200, null);
      return json(200, { ok: true, result: { message_id: 7, echo: payload } });
    });
  });
  server.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  root = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  for (const end of hanging) end();
  await Promise.all(clients.map((c) => c.close()));
  server.close();
});

function api(apiRoot = root): HotBotApi {
  const c = new HotBotApi('1:test', apiRoot);
  clients.push(c);
  return c;
}

describe('the Telegram hot calls (HotBotApi)', () => {
  it("carries grammy Api's payloads and the result, to /bot<token>/<method>", async () => {
    const sent = (await api().sendMessage(42, 'hi', { parse_mode: 'HTML' })) as unknown as { message_id: number; echo: unknown };
    expect(sent.message_id).toBe(7);
    expect(sent.echo).toEqual({ chat_id: 42, text: 'hi', parse_mode: 'HTML' });
    expect(paths.at(-1)).toBe('/bot1:test/sendMessage');
    const edited = (await api().editMessageText(42, 5, { markdown: '**hi**' }, {})) as unknown as { echo: unknown };
    expect(edited.echo).toEqual({ chat_id: 42, message_id: 5, rich_message: { markdown: '**hi**' } });
    const reacted = (await api().setMessageReaction(42, 5, [{ type: 'emoji', emoji: '👍' }], {})) as unknown as { echo: unknown };
    expect(reacted.echo).toEqual({ chat_id: 42, message_id: 5, reaction: [{ type: 'emoji', emoji: '👍' }] });
    const drafted = (await api().sendMessageDraft(42, 9, 'part', { parse_mode: 'HTML' })) as unknown as { echo: unknown };
    expect(drafted.echo).toEqual({ chat_id: 42, draft_id: 9, text: 'part', parse_mode: 'HTML' });
    const typing = (await api().sendChatAction(42, 'typing', { message_thread_id: 3 })) as unknown as { echo: unknown };
    expect(typing.echo).toEqual({ chat_id: 42, action: 'typing', message_thread_id: 3 });
  });

  it("keeps an API root's own path (a Bot API server behind a prefix)", async () => {
    await api(`${root}/tg/`).sendChatAction(42, 'typing');
    expect(paths.at(-1)).toBe('/tg/bot1:test/sendChatAction');
  });

  it('a Bot API refusal stays a GrammyError with its retry_after', async () => {
    const err = await api()
      .sendMessage(429, 'hi')
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GrammyError);
    expect(err).toMatchObject({ method: 'sendMessage', error_code: 429, description: 'Too Many Requests', payload: { chat_id: 429, text: 'hi' } });
    expect(classifyTelegramError(err, 'sendMessage')).toMatchObject({ code: 'CHANNEL_RATE_LIMITED', retryAfterMs: 3000 });
  });

  it.each([
    [502, 'an answer that is not the Bot API (a proxy page)'],
    [413, 'an answer larger than any message (refused, not buffered)'],
    [204, 'JSON that is not an answer object (not a TypeError)'],
  ])('%i: %s is an HttpError, a network failure', async (chat, _what) => {
    const err = await api()
      .sendMessage(chat, 'hi')
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HttpError);
    expect(classifyTelegramError(err, 'sendMessage').code).toBe('CHANNEL_NETWORK');
  });

  it("the caller's signal cuts a request the server never answers", async () => {
    const ac = new AbortController();
    const call = api()
      .sendMessage(0, 'hi', {}, ac.signal as never)
      .catch((e: unknown) => e);
    await expect.poll(() => hanging.size).toBeGreaterThan(0);
    ac.abort();
    expect(await call).toBeInstanceOf(HttpError);
  });
});

describe('the hot calls and the caller signal', () => {
  // A signal aborted before the call is src/util/dispatch-answer.ts's (test/unit/util/dispatch-answer.test.ts).
  it('stops listening to the signal once each call ends, answered or refused', async () => {
    const ac = new AbortController();
    const client = api();
    for (let i = 0; i < 20; i++) await client.sendMessage(42, 'hi', {}, ac.signal as never);
    await client.sendMessage(429, 'hi', {}, ac.signal as never).catch(() => undefined);
    await client.sendMessage(502, 'hi', {}, ac.signal as never).catch(() => undefined);
    expect(getEventListeners(ac.signal, 'abort')).toHaveLength(0);
  });
});
