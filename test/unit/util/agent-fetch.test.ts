import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentFetch } from '../../../src/util/agent-fetch.js';

// A real HTTP server that echoes what it got; the path picks anything else.
let server: Server;
let root: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c));
    req.on('end', () => {
      if (req.url === '/moved') return res.writeHead(302, { location: '/elsewhere' }).end();
      if (req.url === '/large') return res.writeHead(200, { 'content-type': 'application/json' }).end(`"${'x'.repeat(9 * 1024 * 1024)}"`);
      const echo = JSON.stringify({ method: req.method, url: req.url, type: req.headers['content-type'] ?? null, body });
      res.writeHead(req.url === '/limited' ? 429 : 200, { 'content-type': 'application/json', 'retry-after': '7', 'set-cookie': ['a=1', 'b=2'] }).end(echo);
    });
  });
  server.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  root = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => {
  server.closeAllConnections();
  server.close();
});

describe('agentFetch: a fetch for SDKs, over the keep-alive agent', () => {
  it('sends a form body with its content type and answers what an SDK reads', async () => {
    const res = await agentFetch(`${root}/api/chat.postMessage?x=1`, { method: 'POST', body: new URLSearchParams({ text: 'hi there' }), redirect: 'error' });
    expect(res.ok).toBe(true);
    expect(res.status).toBe(200);
    expect(res.statusText).toBe('OK');
    expect(res.headers.get('retry-after')).toBe('7');
    expect(Object.fromEntries(res.headers.entries())['content-type']).toBe('application/json');
    expect(await res.json()).toEqual({
      method: 'POST',
      url: '/api/chat.postMessage?x=1',
      type: 'application/x-www-form-urlencoded;charset=UTF-8',
      body: 'text=hi+there',
    });
  });

  it('a refusal keeps its status, headers and text', async () => {
    const res = await agentFetch(`${root}/limited`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } });
    expect(res).toMatchObject({ ok: false, status: 429, statusText: 'Too Many Requests' });
    expect(res.headers.get('retry-after')).toBe('7');
    expect(JSON.parse(await res.text())).toMatchObject({ type: 'application/json', body: '{}' });
  });

  it('returns a redirect instead of following it', async () => {
    const res = await agentFetch(`${root}/moved`, { redirect: 'error' });
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toBe('/elsewhere');
    await res.text();
  });

  it('refuses an answer larger than its limit instead of buffering it', async () => {
    const res = await agentFetch(`${root}/large`);
    await expect(res.text()).rejects.toThrow(RangeError);
  });

  it('a body it does not take (a multipart upload) goes through global fetch, as before', async () => {
    const form = new FormData();
    form.set('file', new Blob(['abc']), 'a.txt');
    const res = await agentFetch(`${root}/upload`, { method: 'POST', body: form });
    expect(res).toBeInstanceOf(Response);
    const got = (await res.json()) as { type: string; body: string };
    expect(got.type).toMatch(/^multipart\/form-data/);
    expect(got.body).toContain('abc');
  });
});
