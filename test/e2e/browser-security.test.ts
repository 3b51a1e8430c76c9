import { request } from 'node:http';
import WebSocket from 'ws';
import { describe, expect, it } from 'vitest';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import { withDaemon } from '../helpers/fixtures.js';
import { echoAgent, webchatChannel } from '../helpers/toml.js';
import { ChatClient } from '../helpers/webchat-client.js';

const body = echoAgent(150) + webchatChannel();

/** A raw HTTP request, so tests can send the headers a browser (or an attacker) would: Host, Origin, proxies. */
function raw(
  url: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  data?: string,
): Promise<{ status: number; headers: Record<string, unknown>; text: string }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: u.hostname,
        port: u.port,
        method,
        path,
        headers: { ...headers, ...(data !== undefined ? { 'content-length': String(Buffer.byteLength(data)) } : {}) },
      },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => parts.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text: Buffer.concat(parts).toString('utf8') }));
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

/** Opens the web chat WebSocket with chosen headers; resolves with the HTTP status of the refusal, or 101. */
function openWs(url: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/chat?tab=t1`, { headers });
    ws.once('open', () => {
      ws.close();
      resolve(101);
    });
    ws.once('unexpected-response', (_req, res) => resolve(res.statusCode!));
    ws.once('error', reject);
  });
}

describe('browser-facing security', () => {
  let d: TestDaemon | undefined;

  it("management POSTs need a JSON body and an Origin that is absent or the daemon's own (CSRF)", async () => {
    d = await withDaemon(body);
    const host = new URL(d.url).host;
    const own = `http://${host}`;
    // A cross-site form or text/plain fetch: refused before the action runs.
    const plain = await raw(d.url, 'POST', '/actions/reload', { host, 'content-type': 'text/plain', origin: 'http://evil.example' }, '{}');
    expect(plain.status).toBe(415);
    const plainNoOrigin = await raw(d.url, 'POST', '/reload', { host, 'content-type': 'text/plain' }, '{}');
    expect(plainNoOrigin.status).toBe(415);
    const foreign = await raw(d.url, 'POST', '/actions/reload', { host, 'content-type': 'application/json', origin: 'http://evil.example' }, '{}');
    expect(foreign.status).toBe(403);
    // Stopping needs the same check: a guessed id from another site never reaches the lanes.
    const stop = await raw(d.url, 'POST', '/actions/stop-turn', { host, 'content-type': 'text/plain', origin: 'http://evil.example' }, '{"id":"1"}');
    expect(stop.status).toBe(415);
    const stopForeign = await raw(
      d.url,
      'POST',
      '/actions/stop-turn',
      { host, 'content-type': 'application/json', origin: 'http://evil.example' },
      '{"id":"1"}',
    );
    expect(stopForeign.status).toBe(403);
    expect(d.daemon.status().generation).toBe(1);
    // The daemon's own page and non-browser clients (no Origin) are served.
    const mine = await raw(d.url, 'POST', '/actions/reload', { host, 'content-type': 'application/json; charset=utf-8', origin: own }, '{}');
    expect(mine.status).toBe(200);
    const cli = await raw(d.url, 'POST', '/actions/reload', { host, 'content-type': 'application/json' }, '{}');
    expect(cli.status).toBe(200);
    expect(d.daemon.status().generation).toBe(3);
  });

  it('answers only the listen host, localhost, loopback literals and [http] allowed_hosts (DNS rebinding)', async () => {
    d = await withDaemon(body, {}, '', 'allowed_hosts = ["chat.example.com"]\n');
    const port = new URL(d.url).port;
    const evil = await raw(d.url, 'GET', '/status', { host: `evil.example:${port}` });
    expect(evil.status).toBe(421);
    expect(evil.text).not.toContain('generation');
    expect((await raw(d.url, 'GET', '/', { host: 'evil.example' })).status).toBe(421);
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, `127.0.0.2:${port}`, 'chat.example.com', `CHAT.example.com:${port}`]) {
      expect((await raw(d.url, 'GET', '/status', { host })).status, host).toBe(200);
    }
    // The WebSocket too.
    expect(await openWs(d.url, { host: `evil.example:${port}` })).toBe(403);
  });

  it("the web chat WebSocket refuses another site's Origin and accepts its own and non-browser clients", async () => {
    d = await withDaemon(body, {}, '', 'allowed_hosts = ["chat.example.com"]\n');
    expect(await openWs(d.url, { origin: 'http://evil.example' })).toBe(403);
    expect(await openWs(d.url, { origin: 'null' })).toBe(403);
    expect(await openWs(d.url, { origin: d.url })).toBe(101);
    expect(await openWs(d.url, { origin: 'https://chat.example.com' })).toBe(101);
    expect(await openWs(d.url, {})).toBe(101);
  });

  it("pages carry a Content-Security-Policy with frame-ancestors 'none' and X-Content-Type-Options", async () => {
    d = await withDaemon(body);
    for (const path of ['/', '/webchat/web', '/admin']) {
      const res = await fetch(`${d.url}${path}`);
      expect(res.status, path).toBe(200);
      expect(res.headers.get('content-security-policy'), path).toContain("frame-ancestors 'none'");
      expect(res.headers.get('x-content-type-options'), path).toBe('nosniff');
    }
  });

  it('a request relayed by a same-host proxy (Forwarded / X-Forwarded-For) is not loopback', async () => {
    d = await withDaemon(body);
    const host = new URL(d.url).host;
    expect((await raw(d.url, 'GET', '/status', { host })).status).toBe(200);
    expect((await raw(d.url, 'GET', '/status', { host, 'x-forwarded-for': '203.0.113.7' })).status).toBe(403);
    expect((await raw(d.url, 'GET', '/actions/turns', { host, forwarded: 'for=203.0.113.7;proto=https' })).status).toBe(403);
    expect((await raw(d.url, 'POST', '/actions/reload', { host, 'content-type': 'application/json', 'x-forwarded-for': '203.0.113.7' }, '{}')).status).toBe(
      403,
    );
    expect((await raw(d.url, 'GET', '/admin/events', { host, 'x-forwarded-for': '203.0.113.7' })).status).toBe(403);
    // The web chat without an access token answers loopback clients only: a proxied one is refused.
    expect(await openWs(d.url, { 'x-forwarded-for': '203.0.113.7' })).toBe(401);
    const local = new ChatClient(d.url, 'tab-ok');
    await local.opened;
    local.send('still works');
    expect((await local.finals())[0]!.text).toBe('still works');
    local.close();
    await waitFor(() => true);
  });
});
