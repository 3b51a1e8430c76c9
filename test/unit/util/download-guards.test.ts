import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CodedError } from '../../../src/contracts/errors.js';
import { isLocalAddress } from '../../../src/util/address-policy.js';
import { fetchLimited } from '../../../src/util/download.js';
import { registerAttachments } from '../../../src/workspace/attachments.js';
import { userMessage } from '../../helpers/recording-adapter.js';
import { bareRuntime, request, sink } from '../../helpers/runtime.js';

/**
 * Two real HTTP servers: "public" on 127.0.0.2 (the tests count only that address as
 * public) and "local" on 127.0.0.1, standing in for the daemon's own management API.
 */
describe('attachment downloads: redirects, local addresses, credentials and stalls', () => {
  let pub: Server;
  let loc: Server;
  let pubBase = '';
  let locBase = '';
  const seen: Array<{ server: string; url: string; headers: IncomingHttpHeaders }> = [];
  const stalls = new Set<import('node:http').ServerResponse>();
  const isLocal = (a: string) => a !== '127.0.0.2';

  beforeAll(async () => {
    pub = createServer((req, res) => {
      seen.push({ server: 'public', url: req.url!, headers: req.headers });
      const hop = /^\/hop\/(\d+)$/.exec(req.url!);
      if (hop) return void res.writeHead(302, { location: `/hop/${Number(hop[1]) + 1}` }).end();
      if (req.url === '/to-local') return void res.writeHead(302, { location: `${locBase}/status` }).end();
      if (req.url === '/to-file') return void res.writeHead(302, { location: 'file:///etc/passwd' }).end();
      if (req.url === '/to-same') return void res.writeHead(301, { location: '/file' }).end();
      if (req.url === '/file') return void res.writeHead(200).end('the file');
      if (req.url === '/silent') {
        // Headers, then nothing: a stalled transfer.
        stalls.add(res);
        return void res.writeHead(200, { 'content-type': 'text/plain' }).write('x');
      }
      if (req.url === '/drip') {
        // One byte every 50 ms, forever: never idle, never done.
        stalls.add(res);
        res.writeHead(200, { 'content-type': 'text/plain' });
        const t = setInterval(() => res.write('x'), 50);
        res.on('close', () => clearInterval(t));
        return;
      }
      res.writeHead(404).end();
    });
    loc = createServer((req, res) => {
      seen.push({ server: 'local', url: req.url!, headers: req.headers });
      if (req.url === '/to-public') return void res.writeHead(302, { location: `${pubBase}/file` }).end();
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"secret":"status"}');
    });
    await new Promise<void>((r) => pub.listen(0, '127.0.0.2', () => r()));
    await new Promise<void>((r) => loc.listen(0, '127.0.0.1', () => r()));
    pubBase = `http://127.0.0.2:${(pub.address() as AddressInfo).port}`;
    locBase = `http://127.0.0.1:${(loc.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    for (const r of stalls) r.destroy();
    await Promise.all([pub, loc].map((s) => new Promise<void>((r) => s.close(() => r()))));
  });

  const get = (url: string, extra: Partial<Parameters<typeof fetchLimited>[1]> = {}) =>
    fetchLimited(url, { maxBytes: 1000, signal: AbortSignal.timeout(10_000), name: 'notes.txt', isLocal, ...extra });
  const failure = (p: Promise<unknown>) =>
    p.then(
      () => 'ok',
      (e: unknown) => (e instanceof CodedError ? `${e.code}: ${e.message}` : String(e)),
    );

  it('the built-in policy: loopback, private, link-local and mapped addresses are local; public ones are not', () => {
    for (const a of ['127.0.0.1', '10.1.2.3', '172.20.0.1', '192.168.1.1', '169.254.169.254', '::1', 'fe80::1', 'fd00::1', '::ffff:127.0.0.1', '0.0.0.0'])
      expect(isLocalAddress(a), a).toBe(true);
    for (const a of ['93.184.216.34', '149.154.167.220', '2606:4700::1']) expect(isLocalAddress(a), a).toBe(false);
  });

  it('never follows a public URL to a local address or a non-http URL, and follows at most 3 redirects', async () => {
    expect(await failure(get(`${pubBase}/to-local`))).toMatch(/^ATTACHMENT_UNAVAILABLE: .*refused a redirect to a local address/);
    expect(seen.some((s) => s.server === 'local')).toBe(false);
    expect(await failure(get(`${pubBase}/to-file`))).toMatch(/refused a redirect to a file: URL/);
    expect(await failure(get(`${pubBase}/hop/0`))).toMatch(/more than 3 redirects/);
    expect(seen.filter((s) => s.url.startsWith('/hop/'))).toHaveLength(4);
    expect((await get(`${pubBase}/to-same`)).toString()).toBe('the file');
  });

  it('a URL that starts local (a local Bot API server) may stay local; the credentials go to the first origin only', async () => {
    seen.length = 0;
    // fetch drops Authorization on a cross-origin redirect itself; other headers it would pass on.
    const headers = { authorization: 'Bearer daemon-token', 'x-api-key': 'daemon-key' };
    expect((await get(`${locBase}/to-public`, { headers })).toString()).toBe('the file');
    expect(seen.map((s) => [s.server, s.headers.authorization, s.headers['x-api-key']])).toEqual([
      ['local', 'Bearer daemon-token', 'daemon-key'],
      ['public', undefined, undefined],
    ]);
    seen.length = 0;
    expect((await get(`${pubBase}/to-same`, { headers })).toString()).toBe('the file');
    expect(seen.map((s) => s.headers.authorization)).toEqual(['Bearer daemon-token', 'Bearer daemon-token']);
  });

  it('a body that stalls ends with ATTACHMENT_TIMEOUT after the idle timeout', async () => {
    expect(await failure(get(`${pubBase}/silent`, { idleTimeoutMs: 200 }))).toMatch(/^ATTACHMENT_TIMEOUT: notes\.txt: nothing arrived for 200 ms/);
  });

  it('a trickling download does not hold the turn: after attachment_timeout_ms the turn goes on with the file named as not read', async () => {
    const { runtime, runner } = bareRuntime();
    const errors: unknown[] = [];
    registerAttachments(runtime, {
      agent: () => ({ model: 'm', provider: 'echo' }) as never,
      models: () => ({}),
      maxBytes: () => 1_000_000,
      timeoutMs: () => 300,
      onError: (_a, err) => errors.push(err),
    });
    const reply = sink();
    const message = { ...userMessage('t', 'read this'), attachments: [{ id: 'a1', type: 'document' as const, name: 'notes.txt', mime: 'text/plain' }] };
    const outcome = await runtime.run(
      request('read this', reply, {
        message,
        download: (_a, o) => fetchLimited(`${pubBase}/drip`, { ...o, name: 'notes.txt', isLocal }),
      }),
    );
    expect(outcome.ending).toBe('done');
    expect(runner.inputs[0]!.text).toContain('[attachment: notes.txt (text/plain, size unknown); not read: the download timed out]');
    expect(reply.text()).toMatch(/^ℹ️ notes\.txt was not read: the download stalled or took longer than 300 ms\./);
    expect(errors).toHaveLength(1);
  });
});
