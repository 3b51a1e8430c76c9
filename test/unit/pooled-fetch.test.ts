import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Api, GrammyError, HttpError } from 'grammy';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classifyTelegramError } from '../../channels/telegram/errors.js';
import { pooledFetch } from '../../src/util/pooled-fetch.js';

// A real HTTP server answering as the Bot API would; grammy's own Api over the pooled fetch.
let server: Server;
let root: string;
const pooled: ReturnType<typeof pooledFetch>[] = [];
const hanging = new Set<() => void>();

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c));
    req.on('end', () => {
      // The chat id picks the answer: 429 a rate limit, 502 a proxy's page, 0 none at all.
      const payload = JSON.parse(body) as { chat_id: number };
      const json = (status: number, value: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
      if (payload.chat_id === 429) return json(429, { ok: false, error_code: 429, description: 'Too Many Requests', parameters: { retry_after: 3 } });
      if (payload.chat_id === 502) return res.writeHead(502, { 'content-type': 'text/html' }).end('<html>bad gateway</html>');
      if (payload.chat_id === 0) return hanging.add(() => res.destroy());
      return json(200, { ok: true, result: { message_id: 7, echo: payload } });
    });
  });
  server.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  root = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  for (const end of hanging) end();
  await Promise.all(pooled.map((p) => p.close()));
  server.close();
});

function api(): Api {
  const p = pooledFetch(root);
  pooled.push(p);
  return new Api('1:test', { apiRoot: root, fetch: p.fetch });
}

describe('pooledFetch under grammy', () => {
  it('carries the JSON payload and the result', async () => {
    const sent = (await api().sendMessage(42, 'hi', { parse_mode: 'HTML' })) as unknown as { message_id: number; echo: unknown };
    expect(sent.message_id).toBe(7);
    expect(sent.echo).toEqual({ chat_id: 42, text: 'hi', parse_mode: 'HTML' });
  });

  it('a Bot API refusal stays a GrammyError with its retry_after', async () => {
    const err = await api()
      .sendMessage(429, 'hi')
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GrammyError);
    expect(classifyTelegramError(err, 'sendMessage')).toMatchObject({ code: 'CHANNEL_RATE_LIMITED', retryAfterMs: 3000 });
  });

  it('an answer that is not the Bot API (a proxy page) stays an HttpError', async () => {
    const err = await api()
      .sendMessage(502, 'hi')
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
