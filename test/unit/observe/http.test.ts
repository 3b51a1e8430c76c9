import { request } from 'node:http';
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { hostAllowed, hostName, isLoopbackClient, readBody, sameOriginJson, sendJson } from '../../../src/util/http-helpers.js';
import { HttpServer } from '../../../src/observe/http-server.js';
import { Metrics } from '../../../src/observe/metrics.js';
import { registerStatusRoutes } from '../../../src/observe/routes.js';
import type { DaemonStatus } from '../../../src/actions/daemon-status.js';

// The daemon's one HTTP server, on a real socket on 127.0.0.1.

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** A raw request: node:http lets a test send any Host header and stream a body. */
function send(port: number, o: { method?: string; path: string; host?: string; headers?: Record<string, string>; body?: string | Buffer[] }): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, method: o.method ?? 'GET', path: o.path, headers: { host: o.host ?? `127.0.0.1:${port}`, ...o.headers } },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (d: Buffer) => parts.push(d));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(parts).toString('utf8') }));
        // A response cut before its end (the server destroyed the socket).
        res.on('close', () => res.complete || reject(new Error(`answer cut after ${Buffer.concat(parts).length} bytes`)));
        res.on('error', () => {});
      },
    );
    req.on('error', reject);
    if (Array.isArray(o.body)) for (const b of o.body) req.write(b);
    else if (o.body !== undefined) req.write(o.body);
    req.end();
  });
}

describe('HttpServer routing', () => {
  const servers: HttpServer[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.close();
  });
  async function server(allowed: () => readonly string[] = () => [], onError: (err: unknown) => void = () => {}): Promise<{ http: HttpServer; port: number }> {
    const http = new HttpServer(onError, allowed);
    servers.push(http);
    const { port } = await http.listen('127.0.0.1', 0);
    return { http, port };
  }

  it('matches method and exact path; another method on a known path is 405, an unknown path 404', async () => {
    const { http, port } = await server();
    http.route('GET', '/thing', (_q, res) => sendJson(res, 200, { got: 'thing' }));
    expect(await send(port, { path: '/thing' })).toMatchObject({ status: 200, body: '{"got":"thing"}' });
    expect(await send(port, { path: '/thing?x=1' })).toMatchObject({ status: 200 });
    expect(await send(port, { method: 'POST', path: '/thing' })).toMatchObject({ status: 405, body: '{"error":"method not allowed"}' });
    expect(await send(port, { path: '/thing/more' })).toMatchObject({ status: 404, body: '{"error":"not found"}' });
    expect(await send(port, { path: '/Thing' })).toMatchObject({ status: 404 });
  });

  it('HEAD is served by the GET route, without a body', async () => {
    const { http, port } = await server();
    http.route('GET', '/h', (_q, res) => sendJson(res, 200, { a: 1 }));
    const r = await send(port, { method: 'HEAD', path: '/h' });
    expect(r).toMatchObject({ status: 200, body: '' });
    expect(r.headers['content-length']).toBe('7');
  });

  it('a path ending in /* matches the prefix; the exact route wins over it', async () => {
    const { http, port } = await server();
    http.route('POST', '/hooks/*', (_q, res, url) => sendJson(res, 200, { prefix: url.pathname }));
    http.route('POST', '/hooks/special', (_q, res) => sendJson(res, 200, { exact: true }));
    expect(JSON.parse((await send(port, { method: 'POST', path: '/hooks/a/b' })).body)).toEqual({ prefix: '/hooks/a/b' });
    expect(JSON.parse((await send(port, { method: 'POST', path: '/hooks/special' })).body)).toEqual({ exact: true });
    expect((await send(port, { method: 'POST', path: '/hooksx' })).status).toBe(404);
    expect(await send(port, { method: 'GET', path: '/hooks/a' })).toMatchObject({ status: 405, body: '{"error":"method not allowed"}' });
  });

  it('a removed route is gone at once; removing a route that was replaced leaves the replacement', async () => {
    const { http, port } = await server();
    const first = http.route('GET', '/r', (_q, res) => sendJson(res, 200, 'first'));
    http.route('GET', '/r', (_q, res) => sendJson(res, 200, 'second'));
    first();
    expect(http.has('GET', '/r')).toBe(true);
    expect((await send(port, { path: '/r' })).body).toBe('"second"');
    const prefix = http.route('GET', '/p/*', (_q, res) => sendJson(res, 200, 'p'));
    expect((await send(port, { path: '/p/x' })).status).toBe(200);
    prefix();
    expect((await send(port, { path: '/p/x' })).status).toBe(404);
  });

  it('a handler that throws gives 500 and is reported; one that throws mid-answer has its socket cut', async () => {
    const errors: unknown[] = [];
    const { http, port } = await server(
      () => [],
      (err) => errors.push(err),
    );
    http.route('GET', '/boom', () => {
      throw new Error('handler bug');
    });
    http.route('GET', '/half', async (_q, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('partial');
      throw new Error('late bug');
    });
    expect(await send(port, { path: '/boom' })).toMatchObject({ status: 500, body: '{"error":"internal error"}' });
    await expect(send(port, { path: '/half' })).rejects.toThrow('answer cut');
    expect(errors.map((e) => (e as Error).message)).toEqual(['handler bug', 'late bug']);
  });

  it('a Host the daemon does not answer to is refused with 421 before the handler runs or the body is read', async () => {
    const hosts = ['chat.example.org'];
    const { http, port } = await server(() => hosts);
    let ran = 0;
    http.route('POST', '/act', (_q, res) => void (ran++, sendJson(res, 200, 'ran')));
    const refused = await send(port, { method: 'POST', path: '/act', host: 'evil.example', headers: { 'content-type': 'application/json' }, body: '{"a":1}' });
    expect(refused.status).toBe(421);
    expect(JSON.parse(refused.body).error).toContain('evil.example');
    // A missing route is refused the same way: nothing about the routes is told to a foreign name.
    expect((await send(port, { path: '/nothing', host: 'evil.example' })).status).toBe(421);
    expect(ran).toBe(0);
    for (const host of ['localhost:8787', '127.0.0.2', '[::1]:80', 'CHAT.example.org', 'chat.example.org.'])
      expect((await send(port, { method: 'POST', path: '/act', host })).status, host).toBe(200);
    // The allowlist is read per request: a reload applies at once.
    hosts.length = 0;
    expect((await send(port, { method: 'POST', path: '/act', host: 'chat.example.org' })).status).toBe(421);
    expect(ran).toBe(5);
  });

  it('webhooks answer any Host (a proxy may rewrite it); their platform secret authenticates them', async () => {
    const { http, port } = await server();
    http.route('POST', '/webhooks/*', (_q, res) => sendJson(res, 200, 'hook'), { scheme: 'secret-token', describe: 'not checked in this test' });
    expect((await send(port, { method: 'POST', path: '/webhooks/tg', host: 'bot.example.com' })).status).toBe(200);
  });

  it('a WebSocket upgrade from a foreign Origin or Host is refused; an unknown path is 404', async () => {
    const { http, port } = await server();
    let upgraded = 0;
    http.upgrade('/ws', (_q, socket) => {
      upgraded++;
      socket.end('HTTP/1.1 101 Switching Protocols\r\n\r\n');
    });
    const raw = (path: string, host: string, origin?: string) =>
      new Promise<string>((resolve, reject) => {
        const s = connect(port, '127.0.0.1');
        let out = '';
        s.on('data', (d) => (out += String(d)));
        s.on('end', () => resolve(out.split('\r\n')[0]!));
        s.on('error', reject);
        s.write(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n${origin ? `Origin: ${origin}\r\n` : ''}\r\n`);
      });
    expect(await raw('/ws', 'localhost', 'https://evil.example')).toBe('HTTP/1.1 403 Forbidden');
    expect(await raw('/ws', 'evil.example')).toBe('HTTP/1.1 403 Forbidden');
    expect(await raw('/nope', 'localhost')).toBe('HTTP/1.1 404 Not Found');
    expect(upgraded).toBe(0);
    // Another local web app (another port) is not this page.
    expect(await raw('/ws', `localhost:${port}`, 'http://localhost:1234')).toBe('HTTP/1.1 403 Forbidden');
    expect(await raw('/ws', `127.0.0.1:${port}`, `http://localhost:${port}`)).toBe('HTTP/1.1 403 Forbidden');
    expect(upgraded).toBe(0);
    expect(await raw('/ws', `localhost:${port}`, `http://localhost:${port}`)).toBe('HTTP/1.1 101 Switching Protocols');
    expect(upgraded).toBe(1);
  });
});

describe('readBody', () => {
  const servers: HttpServer[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.close();
  });

  it('refuses a declared length over the limit before reading, and a streamed body as soon as it passes it', async () => {
    const http = new HttpServer();
    servers.push(http);
    const { port } = await http.listen('127.0.0.1', 0);
    const seen: Array<number | 'too_large'> = [];
    http.route('POST', '/b', async (req, res) => {
      const body = await readBody(req, 10);
      seen.push(body === 'too_large' ? body : body.length);
      sendJson(res, body === 'too_large' ? 413 : 200, {});
    });
    expect((await send(port, { method: 'POST', path: '/b', body: '0123456789' })).status).toBe(200);
    expect((await send(port, { method: 'POST', path: '/b', body: '0123456789a' })).status).toBe(413);
    // Chunked, no length given: cut when the bytes pass the limit.
    expect(
      (await send(port, { method: 'POST', path: '/b', headers: { 'transfer-encoding': 'chunked' }, body: [Buffer.from('012345'), Buffer.from('6789ab')] }))
        .status,
    ).toBe(413);
    expect(seen).toEqual([10, 'too_large', 'too_large']);
  });
});

describe('request checks', () => {
  it('hostName takes the host part of a Host header or URL host', () => {
    expect(hostName('[::1]:8787')).toBe('::1');
    expect(hostName('Example.COM.:80')).toBe('example.com');
    expect(hostName('fe80::1')).toBe('fe80::1');
    expect(hostName(' localhost ')).toBe('localhost');
  });

  it('hostAllowed: loopback names and the allowlist, nothing else', () => {
    expect(hostAllowed(undefined, [])).toBe(false);
    expect(hostAllowed('app.localhost:3000', [])).toBe(true);
    expect(hostAllowed('127.0.0.1.evil.example', [])).toBe(false);
    expect(hostAllowed('localhost.evil.example', [])).toBe(false);
    expect(hostAllowed('bot.example.com', ['bot.example.com:443'])).toBe(true);
  });

  it('a request carrying a proxy header is never a loopback client, whatever its socket says', () => {
    const from = (remoteAddress: string, headers: Record<string, string> = {}) => isLoopbackClient({ headers, socket: { remoteAddress } } as never);
    expect(from('127.0.0.1')).toBe(true);
    expect(from('::ffff:127.0.0.1')).toBe(true);
    expect(from('10.0.0.2')).toBe(false);
    for (const h of ['forwarded', 'x-forwarded-for', 'x-real-ip']) expect(from('127.0.0.1', { [h]: '203.0.113.9' }), h).toBe(false);
  });

  it("sameOriginJson: a JSON body from no Origin or this daemon's own", () => {
    const check = (headers: Record<string, string>) => sameOriginJson({ headers } as never);
    expect(check({ 'content-type': 'application/json; charset=utf-8', host: 'localhost:8787' })).toBe('ok');
    expect(check({ 'content-type': 'text/plain', host: 'localhost:8787' })).toBe('not_json');
    expect(check({ 'content-type': 'application/json', host: 'localhost:8787', origin: 'http://localhost:8787' })).toBe('ok');
    expect(check({ 'content-type': 'application/json', host: 'localhost:8787', origin: 'http://localhost:9999' })).toBe('foreign_origin');
    expect(check({ 'content-type': 'application/json', host: 'localhost:8787', origin: 'null' })).toBe('foreign_origin');
  });
});

describe('status routes', () => {
  it('/healthz always, /readyz 503 with the storage code while not ready, /metrics in the registry format', async () => {
    const http = new HttpServer();
    const { port } = await http.listen('127.0.0.1', 0);
    try {
      const status: DaemonStatus = {
        version: 't',
        pid: 1,
        started_at: '',
        uptime_s: 0,
        generation: 1,
        ready: false,
        channels: [{ id: 'tg', state: 'connecting', in_flight: 0, queued: 0 }],
        turns: { in_flight: 0, queued: 0, list: [] },
        agents: [],
        last_reload: null,
        storage: { state: 'degraded', code: 'SQLITE_FULL', error: 'full', since: '', pending_writes: 3 },
      };
      const metrics = new Metrics(false);
      const dispose = registerStatusRoutes(http, metrics, () => status);
      expect(await send(port, { path: '/healthz' })).toMatchObject({ status: 200, body: '{"ok":true}' });
      const ready = await send(port, { path: '/readyz' });
      expect(ready.status).toBe(503);
      expect(JSON.parse(ready.body)).toEqual({ ready: false, storage: 'degraded', storage_code: 'SQLITE_FULL', channels: [{ id: 'tg', state: 'connecting' }] });
      status.ready = true;
      status.storage = { ...status.storage, state: 'ok', code: null };
      expect(JSON.parse((await send(port, { path: '/readyz' })).body)).toEqual({ ready: true, storage: 'ok', channels: [{ id: 'tg', state: 'connecting' }] });
      const m = await send(port, { path: '/metrics' });
      expect(m.headers['content-type']).toBe(metrics.registry.contentType);
      expect(m.body).toContain('# TYPE');
      dispose();
      expect((await send(port, { path: '/healthz' })).status).toBe(404);
    } finally {
      await http.close();
    }
  });
});
