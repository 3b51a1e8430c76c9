import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { WebchatAdapter } from '../../../channels/webchat/adapter.js';
import type { SocketCaps } from '../../../channels/webchat/socket-caps.js';
import type { ChannelMessage } from '../../../src/contracts/message.js';
import { HttpServer } from '../../../src/observe/http-server.js';
import { waitFor } from '../../helpers/daemon.js';

/** The files in a folder; none when it does not exist. */
const filesIn = (dir: string): string[] => {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
};

/** A web chat adapter on a real HTTP server, with the messages it delivers collected. */
async function start(o: { accessToken?: string; uploadQuotaBytes?: number; maxBytes?: number; socketCaps?: SocketCaps } = {}) {
  const http = new HttpServer(
    () => {},
    () => ['chat.example.com'],
  );
  const { port } = await http.listen('127.0.0.1', 0);
  const stateDir = mkdtempSync(join(tmpdir(), 'webchat-hard-'));
  const warnings: unknown[] = [];
  const log = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(JSON.parse(line)) });
  const adapter = new WebchatAdapter({
    id: 'web',
    http,
    stateDir,
    maxAttachmentBytes: () => o.maxBytes ?? 1000,
    ...(o.accessToken ? { accessToken: o.accessToken } : {}),
    ...(o.uploadQuotaBytes ? { uploadQuotaBytes: o.uploadQuotaBytes } : {}),
    ...(o.socketCaps ? { socketCaps: o.socketCaps } : {}),
    log,
  });
  const delivered: ChannelMessage[] = [];
  const stop = new AbortController();
  let up!: () => void;
  const connected = new Promise<void>((r) => (up = r));
  const listening = adapter.listen(
    async (m) => {
      delivered.push(m);
      return true;
    },
    stop.signal,
    () => up(),
  );
  await connected;
  const base = `http://127.0.0.1:${port}`;
  const close = async () => {
    stop.abort();
    await listening;
    await http.close();
    rmSync(stateDir, { recursive: true, force: true });
  };
  return { base, port, adapter, delivered, warnings, stateDir, uploads: join(stateDir, 'uploads', 'web'), close };
}

describe('web chat: identity, origins and uploads', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0)) await c();
  });
  const started = async (o: Parameters<typeof start>[0] = {}) => {
    const s = await start(o);
    cleanups.push(s.close);
    return s;
  };

  const say = async (base: string, tab: string, text: string, token?: string) => {
    const ws = new WebSocket(`${base.replace('http', 'ws')}/chat?tab=${tab}${token ? `&token=${token}` : ''}`);
    await new Promise((r, j) => ws.once('open', r).once('error', j));
    ws.send(JSON.stringify({ type: 'message', id: `m-${text}`, text }));
    await new Promise<void>((r) => ws.on('message', (d) => String(d).includes('"ack"') && r()));
    ws.close();
  };

  it('the sender id is made by the server: a tab named like an approver does not get that id', async () => {
    const s = await started({ accessToken: 'secret-token' });
    await say(s.base, 'alice', 'one', 'secret-token');
    await say(s.base, 'alice', 'two', 'secret-token');
    await say(s.base, 'bob', 'three', 'secret-token');
    await waitFor(() => s.delivered.length === 3);
    const [a1, a2, b] = s.delivered.map((m) => m.sender.id);
    expect(a1).toMatch(/^web-[0-9a-f]{16}$/);
    expect(a1).not.toBe('alice');
    expect(a2).toBe(a1);
    expect(b).not.toBe(a1);
    // The conversation is still the tab's.
    expect(s.delivered[0]!.chat.id).toBe('alice');
    // Bound to the token: another daemon with the same token gives the same id, without it another.
    const same = await started({ accessToken: 'secret-token' });
    expect(same.adapter.senderIdOf('alice')).toBe(a1);
    const other = await started({ accessToken: 'other-token' });
    expect(other.adapter.senderIdOf('alice')).not.toBe(a1);
    // Without a token the key is kept in the state dir: the same daemon gives the same id after a restart.
    const open = await started();
    const again = new WebchatAdapter({
      id: 'web',
      http: new HttpServer(),
      log: pino({ level: 'silent' }),
      stateDir: open.stateDir,
      maxAttachmentBytes: () => 1,
    });
    expect(again.senderIdOf('alice')).toBe(open.adapter.senderIdOf('alice'));
    expect(open.adapter.senderIdOf('alice')).not.toBe(a1);
  });

  const upload = (base: string, headers: Record<string, string>, body: string | Buffer, tab = 't1') =>
    fetch(`${base}/webchat/web/upload?tab=${tab}`, { method: 'POST', headers: { 'content-type': 'text/plain', ...headers }, body });

  it("uploads take only the page's own Origin (not another site, not another local port); the WebSocket alike", async () => {
    const s = await started();
    expect((await upload(s.base, { origin: 'http://evil.example' }, 'x')).status).toBe(403);
    expect((await upload(s.base, { origin: 'http://localhost:1' }, 'x')).status).toBe(403);
    expect((await upload(s.base, { origin: `http://localhost:${s.port}` }, 'x')).status).toBe(403); // the page was not served from there
    expect(filesIn(s.uploads)).toEqual([]);
    expect((await upload(s.base, { origin: s.base }, 'x')).status).toBe(200);
    expect((await upload(s.base, { origin: 'https://chat.example.com' }, 'x')).status).toBe(200);
    expect((await upload(s.base, {}, 'x')).status).toBe(200);
    const ws = (origin: string) =>
      new Promise<number>((resolve, reject) => {
        const c = new WebSocket(`${s.base.replace('http', 'ws')}/chat?tab=t1`, { headers: { origin } });
        c.once('open', () => {
          c.close();
          resolve(101);
        });
        c.once('unexpected-response', (_q, r) => resolve(r.statusCode!));
        c.once('error', reject);
      });
    expect(await ws(`http://localhost:${s.port + 1}`)).toBe(403);
    expect(await ws(s.base)).toBe(101);
  });

  /** A WebSocket to a tab: open (kept until the test closes it), or the HTTP status that refused it. */
  const connect = (base: string, tab: string) =>
    new Promise<WebSocket | number>((resolve, reject) => {
      const c = new WebSocket(`${base.replace('http', 'ws')}/chat?tab=${tab}`);
      c.once('open', () => resolve(c));
      c.once('unexpected-response', (_q, r) => {
        expect(r.headers['retry-after']).toBe('10');
        resolve(r.statusCode!);
      });
      c.once('error', reject);
    });
  const closeAll = async (sockets: Array<WebSocket | number>) => {
    for (const c of sockets) if (typeof c !== 'number') await new Promise((r) => c.once('close', r).close());
  };

  it('a tab holds at most 8 connections: the ninth is refused with 429 before the upgrade, and a closed one makes room', async () => {
    const s = await started();
    const open = [];
    for (let i = 0; i < 8; i++) open.push(await connect(s.base, 'dup'));
    expect(open.every((c) => typeof c !== 'number')).toBe(true);
    expect(await connect(s.base, 'dup')).toBe(429);
    // Another tab is not held back by this one.
    const other = await connect(s.base, 'other');
    expect(typeof other).not.toBe('number');
    await closeAll([open.pop()!]);
    await waitFor(async () => {
      const c = await connect(s.base, 'dup');
      if (typeof c !== 'number') open.push(c);
      return typeof c !== 'number';
    });
    expect(s.warnings).toMatchObject([{ msg: 'web chat connections refused: too many open', channel: 'web', reason: 'a tab may hold 8 connections at once' }]);
    await closeAll([...open, other]);
  });

  it('the connect check tells the page why its handshake is refused: 204 when one would be taken, 429 with the cap, 401 for the token, 403 for another origin; it takes nothing', async () => {
    const check = async (base: string, q: string, headers: Record<string, string> = {}) => {
      const r = await fetch(`${base}/webchat/web/connect-check?${q}`, { method: 'POST', headers });
      return { status: r.status, retryAfter: r.headers.get('retry-after'), body: r.status === 204 ? '' : await r.json() };
    };
    const s = await started({ socketCaps: { perTab: 2, total: 3 } });
    expect(await check(s.base, 'tab=a')).toEqual({ status: 204, retryAfter: null, body: '' });
    const open = [await connect(s.base, 'a'), await connect(s.base, 'a')];
    expect(await check(s.base, 'tab=a')).toEqual({ status: 429, retryAfter: '10', body: { error: 'a tab may hold 2 connections at once' } });
    expect(await check(s.base, 'tab=b')).toMatchObject({ status: 204 });
    open.push(await connect(s.base, 'b'));
    expect(await check(s.base, 'tab=c')).toEqual({ status: 429, retryAfter: '10', body: { error: 'the channel holds 3 connections at once' } });
    // Asking counted no refusal and took no socket.
    expect(s.warnings).toEqual([]);
    await closeAll(open);
    await waitFor(async () => (await check(s.base, 'tab=a')).status === 204);

    const t = await started({ accessToken: 'tok-1' });
    expect(await check(t.base, 'tab=a&token=wrong')).toEqual({ status: 401, retryAfter: null, body: { error: 'the access token was refused' } });
    expect(await check(t.base, 'tab=a&token=tok-1')).toMatchObject({ status: 204 });
    // Another site's page cannot try tokens through it: refused on its Origin, as the handshake is.
    expect(await check(t.base, 'tab=a&token=tok-1', { origin: 'https://evil.example' })).toMatchObject({ status: 403 });
    expect(await check(t.base, 'tab=a&token=tok-1', { origin: t.base })).toMatchObject({ status: 204 });
  });

  it('the channel holds at most its cap of connections, all tabs together; refusals are logged once a minute, not once each', async () => {
    const s = await started({ socketCaps: { perTab: 8, total: 3 } });
    const open = [await connect(s.base, 'a'), await connect(s.base, 'b'), await connect(s.base, 'c')];
    expect(await connect(s.base, 'd')).toBe(429);
    expect(await connect(s.base, 'a')).toBe(429);
    expect(s.warnings).toHaveLength(1);
    expect(s.warnings[0]).toMatchObject({ reason: 'the channel holds 3 connections at once' });
    await closeAll(open);
    await waitFor(async () => {
      const c = await connect(s.base, 'd');
      if (typeof c !== 'number') open.push(c);
      return typeof c !== 'number';
    });
    await closeAll(open.slice(3));
  });

  it('a malformed x-file-name is 400 with nothing kept', async () => {
    const s = await started();
    const r = await upload(s.base, { 'x-file-name': '%E0%A4%A' }, 'some bytes');
    expect(r.status).toBe(400);
    expect(((await r.json()) as { error: string }).error).toContain('x-file-name');
    expect(filesIn(s.uploads)).toEqual([]);
  });

  it('a disk that refuses the write is 507 with a reason, and nothing is kept', async () => {
    const s = await started();
    // The uploads folder cannot be made: a file stands where it would go.
    writeFileSync(join(s.stateDir, 'uploads'), 'in the way');
    const r = await upload(s.base, {}, 'bytes');
    expect(r.status).toBe(507);
    expect(((await r.json()) as { error: string }).error).toMatch(/could not be stored \(E[A-Z]+\)/);
    expect(filesIn(s.uploads)).toEqual([]);
  });

  it('uploads have a total quota and a quarter of it per tab; past it 413 before the body is kept', async () => {
    const s = await started({ uploadQuotaBytes: 4000, maxBytes: 1000 });
    const kb = Buffer.alloc(1000, 1);
    expect((await upload(s.base, {}, kb, 'a')).status).toBe(200);
    // Tab a has used its quarter (1000 bytes).
    const refused = await upload(s.base, {}, kb, 'a');
    expect(refused.status).toBe(413);
    expect(((await refused.json()) as { error: string }).error).toContain('upload_quota_bytes');
    for (const tab of ['b', 'c', 'd']) expect((await upload(s.base, {}, kb, tab)).status).toBe(200);
    // 4000 bytes stored: the total is used up for every tab.
    expect((await upload(s.base, {}, 'x', 'e')).status).toBe(413);
    expect(filesIn(s.uploads)).toHaveLength(4);

    // Two at once from one tab cannot both pass: the room is held while a body is read.
    const t = await started({ uploadQuotaBytes: 4000, maxBytes: 1000 });
    const both = await Promise.all([upload(t.base, {}, kb, 'x'), upload(t.base, {}, kb, 'x')]);
    expect(both.map((r) => r.status).sort()).toEqual([200, 413]);
  });
});
