import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpJson } from '../../../src/util/http-json.js';

// A real HTTP server; the path picks the answer.
let server: Server;
let root: string;
const hanging = new Set<() => void>();
/** What the server saw of the last request. */
let seen: { method?: string; url?: string; auth?: string; body?: string } = {};

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c));
    req.on('end', () => {
      seen = { method: req.method!, url: req.url!, auth: req.headers.authorization!, body };
      const path = req.url!.split('?')[0];
      if (path === '/json') return res.writeHead(200, { 'content-type': 'application/json', 'x-a': 'b' }).end('{"a":1}');
      if (path === '/html') return res.writeHead(502, { 'content-type': 'text/html', 'retry-after': '3' }).end('<html>bad gateway</html>');
      if (path === '/empty') return res.writeHead(204).end();
      if (path === '/declared') return res.writeHead(200, { 'content-length': '5000' }).end('x'.repeat(5000));
      if (path === '/streamed') {
        // No length declared: the body is cut off once it passes the limit.
        res.writeHead(200, { 'content-type': 'application/json' });
        const chunk = 'x'.repeat(1024);
        const pump = () => {
          while (res.write(chunk));
        };
        res.on('drain', pump);
        res.on('close', () => res.off('drain', pump));
        return pump();
      }
      if (path === '/moved') return res.writeHead(302, { location: `${root}/json` }).end();
      if (path === '/hang') return hanging.add(() => res.destroy());
      res.writeHead(404).end();
    });
  });
  server.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  root = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => {
  for (const end of hanging) end();
  server.closeAllConnections();
  server.close();
});

const call = (path: string, o: { method?: string; body?: string; maxAnswerBytes?: number; signal?: AbortSignal } = {}) =>
  httpJson(`${root}${path}`, {
    method: o.method ?? 'GET',
    headers: { authorization: 'Bearer t0ken' },
    ...(o.body !== undefined ? { body: o.body } : {}),
    signal: o.signal ?? AbortSignal.timeout(10_000),
    maxAnswerBytes: o.maxAnswerBytes ?? 1000,
  });

describe('httpJson: the platforms REST calls', () => {
  it('sends method, path with query, headers and body; answers status, headers, text and JSON', async () => {
    const a = await call('/json?x=1', { method: 'POST', body: '{"q":2}' });
    expect(seen).toEqual({ method: 'POST', url: '/json?x=1', auth: 'Bearer t0ken', body: '{"q":2}' });
    expect(a).toMatchObject({ status: 200, ok: true, text: '{"a":1}', json: { a: 1 }, tooLarge: false });
    expect(a.header('x-a')).toBe('b');
    expect(a.header('x-missing')).toBeUndefined();
  });

  it('keeps the text of what is not JSON, with the status and headers of a refusal', async () => {
    const a = await call('/html');
    expect(a).toMatchObject({ status: 502, ok: false, text: '<html>bad gateway</html>', json: undefined });
    expect(a.header('retry-after')).toBe('3');
    expect(await call('/empty')).toMatchObject({ status: 204, ok: true, text: '', json: {} });
  });

  it('refuses a declared length over the limit before reading, and cuts off a body that grows past it', async () => {
    expect(await call('/declared')).toMatchObject({ status: 200, tooLarge: true, text: '', json: undefined });
    expect(await call('/streamed', { maxAnswerBytes: 64 * 1024 })).toMatchObject({ status: 200, tooLarge: true });
    // The connection is still usable for the next call.
    expect(await call('/json')).toMatchObject({ ok: true, json: { a: 1 } });
  });

  it('never follows a redirect: a 3xx is an answer, so the token stays with this host', async () => {
    expect(await call('/moved')).toMatchObject({ status: 302, ok: false });
    expect(seen.url).toBe('/moved');
  });

  it("the caller's signal cuts a request the server never answers", async () => {
    const ac = new AbortController();
    const pending = call('/hang', { signal: ac.signal }).catch((e: unknown) => e);
    await expect.poll(() => hanging.size).toBeGreaterThan(0);
    ac.abort(new Error('stop'));
    expect(await pending).toBeInstanceOf(Error);
  });
});
