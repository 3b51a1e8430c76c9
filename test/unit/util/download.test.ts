import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkSize, fetchLimited } from '../../../src/util/download.js';
import { CodedError } from '../../../src/contracts/errors.js';
import { kindOf } from '../../../src/workspace/attachments.js';

describe('fetchLimited: a byte limit on attachment downloads', () => {
  let server: Server;
  let base = '';
  beforeAll(async () => {
    server = createServer((req, res) => {
      if (req.url === '/declared') return void res.writeHead(200, { 'content-length': '5000' }).end('x'.repeat(5000));
      if (req.url === '/chunked') {
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        for (let i = 0; i < 10; i++) res.write('y'.repeat(1000));
        return void res.end();
      }
      if (req.url === '/page') return void res.writeHead(200, { 'content-type': 'text/html' }).end('<html>sign in</html>');
      if (req.url === '/ok') return void res.writeHead(200, { 'content-length': '3' }).end('abc');
      res.writeHead(404).end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  const get = (path: string, maxBytes = 1000, html = false) =>
    fetchLimited(`${base}${path}`, { maxBytes, signal: AbortSignal.timeout(5000), name: path, htmlMeansRefused: html });
  const code = (p: Promise<unknown>) =>
    p.then(
      () => 'ok',
      (e: unknown) => (e instanceof CodedError ? e.code : String(e)),
    );

  it('refuses a Content-Length over the limit, cuts a body that grows past it, and reads one within it', async () => {
    expect(await code(get('/declared'))).toBe('ATTACHMENT_TOO_LARGE');
    expect(await code(get('/chunked'))).toBe('ATTACHMENT_TOO_LARGE');
    expect((await get('/ok')).toString()).toBe('abc');
    expect(await code(get('/missing'))).toBe('ATTACHMENT_UNAVAILABLE');
    expect(await code(get('/page', 1000, true))).toBe('ATTACHMENT_UNAVAILABLE');
  });

  it("a web page refused names no platform's token scope unless the caller gives the hint", async () => {
    const message = (p: Promise<unknown>) => p.then(String, (e: unknown) => (e as Error).message);
    const plain = await message(get('/page', 1000, true));
    expect(plain).toMatch(/^\/page: the platform answered with a web page instead of the file\b/);
    expect(plain).not.toContain('files:read');
    const hinted = fetchLimited(`${base}/page`, {
      maxBytes: 1000,
      signal: AbortSignal.timeout(5000),
      name: 'f',
      htmlMeansRefused: true,
      refusedHint: 'scope?',
    });
    expect(await message(hinted)).toMatch(/^f: the platform answered with a web page instead of the file \(scope\?\)/);
  });

  it('checkSize refuses a known size before any request', () => {
    expect(() => checkSize('big.bin', 2000, 1000)).toThrow(/big\.bin has 2000 bytes/);
    expect(() => checkSize('unknown', undefined, 1000)).not.toThrow();
  });

  it('kindOf: images, text by MIME type or extension, audio (transcribed), the rest described', () => {
    expect(kindOf({ id: '1', type: 'photo' })).toBe('image');
    expect(kindOf({ id: '1', type: 'image', mime: 'image/webp' })).toBe('image');
    expect(kindOf({ id: '1', type: 'document', mime: 'application/json' })).toBe('text');
    expect(kindOf({ id: '1', type: 'file', name: 'main.rs', mime: 'application/octet-stream' })).toBe('text');
    expect(kindOf({ id: '1', type: 'voice', mime: 'audio/ogg' })).toBe('audio');
    expect(kindOf({ id: '1', type: 'file', name: 'memo.mp3', mime: 'audio/mpeg' })).toBe('audio');
    expect(kindOf({ id: '1', type: 'document', name: 'report.pdf', mime: 'application/pdf' })).toBe('other');
  });
});
