import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { getEventListeners } from 'node:events';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Dispatcher, Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { dispatchAnswer, whenSent } from '../../../src/util/dispatch-answer.js';
import { scaled } from '../../helpers/timing.js';

// A real HTTP server; the path picks the answer.
let server: Server;
let origin: string;
const seen: string[] = [];
const open = new Set<ServerResponse>();
const pools: Pool[] = [];
/** Answers of `/held`, sent when a test says. */
const held: ServerResponse[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    seen.push(req.url!);
    req.resume();
    req.on('end', () => {
      switch (req.url) {
        case '/json':
          return res.writeHead(200, { 'content-type': 'application/json', 'x-a': 'b' }).end('{"ok":true}');
        case '/refused':
          return res.writeHead(403, { 'content-type': 'text/plain' }).end('no');
        case '/empty':
          return res.writeHead(204).end();
        case '/declared-large':
          return res.writeHead(200, { 'content-length': '5000' }).end('x'.repeat(5000));
        case '/growing':
          // Chunked, no declared length: 3 × 600 bytes against a limit of 1,000.
          res.writeHead(200, { 'content-type': 'text/plain' });
          res.write('a'.repeat(600));
          setTimeout(() => res.write('b'.repeat(600)), 5);
          setTimeout(() => res.end('c'.repeat(600)), 10);
          return;
        case '/hangs-mid-body':
          open.add(res);
          res.writeHead(200, { 'content-type': 'application/json' });
          res.write('{"ok":');
          return;
        case '/early-hints':
          // A 103 with a large declared length before the real answer: only the real one counts.
          res.writeEarlyHints({ link: '</style.css>; rel=preload', 'content-length': '5000' });
          return res.writeHead(200, { 'content-type': 'application/json' }).end('{"final":true}');
        case '/held':
          held.push(res);
          return;
        case '/head':
          return res.writeHead(200, { 'content-length': '5000' }).end();
        case '/redirect':
          return res.writeHead(302, { location: 'http://127.0.0.2/elsewhere' }).end();
        default:
          return res.writeHead(404).end();
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  for (const res of [...open, ...held]) res.destroy();
  await Promise.all(pools.map((p) => p.close()));
  server.close();
});

function pool(): Pool {
  const p = new Pool(origin, { connections: 4 });
  pools.push(p);
  return p;
}

const get = (path: string) => ({ path, method: 'GET' as const });

describe('dispatchAnswer', () => {
  it('gives the status, headers and whole body of any answer, a refusal and an empty one included', async () => {
    const p = pool();
    const ok = await dispatchAnswer(p, get('/json'), undefined, 1000);
    expect(ok.status).toBe(200);
    expect(ok.headers['x-a']).toBe('b');
    expect(ok.body?.toString()).toBe('{"ok":true}');
    const refused = await dispatchAnswer(p, get('/refused'), undefined, 1000);
    expect([refused.status, refused.body?.toString()]).toEqual([403, 'no']);
    const empty = await dispatchAnswer(p, get('/empty'), undefined, 1000);
    expect([empty.status, empty.body?.length]).toEqual([204, 0]);
  });

  it('gives no body for a declared length over the limit, nor for a body that grows past it', async () => {
    const p = pool();
    const declared = await dispatchAnswer(p, get('/declared-large'), undefined, 1000);
    expect([declared.status, declared.body]).toEqual([200, undefined]);
    const growing = await dispatchAnswer(p, get('/growing'), undefined, 1000);
    expect([growing.status, growing.body]).toEqual([200, undefined]);
    // The pool still serves after the cut requests.
    expect((await dispatchAnswer(p, get('/json'), undefined, 1000)).status).toBe(200);
  });

  it('notes in whenSent when a request went out on a connection, after its wait for a free one, not when it was asked', async () => {
    const one = new Pool(origin, { connections: 1 });
    pools.push(one);
    const [first, second] = [
      { signal: new AbortController().signal, sent: {} as { atMs?: number } },
      { signal: new AbortController().signal, sent: {} as { atMs?: number } },
    ];
    for (const r of [first, second]) whenSent(r.signal, r.sent);
    const askedAt = Date.now();
    const a = dispatchAnswer(one, get('/held'), first.signal, 1000);
    const b = dispatchAnswer(one, get('/json'), second.signal, 1000);
    await expect.poll(() => held.length, { timeout: scaled(5000) }).toBe(1);
    expect(first.sent.atMs).toBeGreaterThanOrEqual(askedAt);
    // The second waits for the pool's one connection.
    expect(second.sent.atMs).toBeUndefined();
    const releasedAt = Date.now();
    held.pop()!.writeHead(200).end('{}');
    await a;
    expect((await b).status).toBe(200);
    expect(second.sent.atMs).toBeGreaterThanOrEqual(releasedAt);
  });

  it('never follows a redirect', async () => {
    const answer = await dispatchAnswer(pool(), get('/redirect'), undefined, 1000);
    expect([answer.status, answer.headers.location]).toEqual([302, 'http://127.0.0.2/elsewhere']);
  });

  it("the caller's signal cuts an answer that stops coming mid-body, with the signal's reason", async () => {
    // Aborted once the client has read the answer's headers (undici says so on this channel).
    let headers = 0;
    const onHeaders = () => headers++;
    subscribe('undici:request:headers', onHeaders);
    const ac = new AbortController();
    const call = dispatchAnswer(pool(), get('/hangs-mid-body'), ac.signal, 1000).catch((e: unknown) => e);
    await expect.poll(() => headers).toBe(1);
    unsubscribe('undici:request:headers', onHeaders);
    const reason = new Error('turn ended');
    ac.abort(reason);
    expect(await call).toBe(reason);
    expect(getEventListeners(ac.signal, 'abort')).toHaveLength(0);
  });

  it('a signal already aborted dispatches nothing', async () => {
    const ac = new AbortController();
    ac.abort(new Error('gone'));
    const dispatcher = { dispatch: vi.fn() } as unknown as Dispatcher;
    await expect(dispatchAnswer(dispatcher, get('/json'), ac.signal, 1000)).rejects.toThrow('gone');
    expect(dispatcher.dispatch).not.toHaveBeenCalled();
  });

  it('a call aborted while it waits for a connection ends at once, never reaches the server, and the pool serves on', async () => {
    const one = new Pool(origin, { connections: 1 });
    pools.push(one);
    // The only connection is held by an answer that stops coming.
    const held = new AbortController();
    const holding = dispatchAnswer(one, get('/hangs-mid-body'), held.signal, 1000).catch((e: unknown) => e);
    await expect.poll(() => open.size).toBeGreaterThan(0);
    const queued = new AbortController();
    const waiting = dispatchAnswer(one, get('/json?queued'), queued.signal, 1000).catch((e: unknown) => e);
    const reason = new Error('turn ended');
    queued.abort(reason);
    expect(await waiting).toBe(reason);
    expect(getEventListeners(queued.signal, 'abort')).toHaveLength(0);
    held.abort(new Error('done holding'));
    await holding;
    expect((await dispatchAnswer(one, get('/json'), undefined, 1000)).status).toBe(200);
    expect(seen).not.toContain('/json?queued');
  });

  it('reads past an informational answer to the real one, and a HEAD answer declares a length it does not carry', async () => {
    const p = pool();
    const hinted = await dispatchAnswer(p, get('/early-hints'), undefined, 1000);
    expect([hinted.status, hinted.body?.toString()]).toEqual([200, '{"final":true}']);
    const head = await dispatchAnswer(p, { path: '/head', method: 'HEAD' }, undefined, 1000);
    expect([head.status, head.body?.length]).toEqual([200, 0]);
  });

  it('refuses a tunnel (CONNECT), whose answer is a socket, not a body', async () => {
    const dispatcher = { dispatch: vi.fn() } as unknown as Dispatcher;
    await expect(dispatchAnswer(dispatcher, { path: '127.0.0.1:1', method: 'CONNECT' }, undefined, 1000)).rejects.toThrow(TypeError);
    expect(dispatcher.dispatch).not.toHaveBeenCalled();
  });

  it('stops listening to the signal when each call ends, whichever way', async () => {
    const ac = new AbortController();
    const p = pool();
    for (let i = 0; i < 10; i++) await dispatchAnswer(p, get('/json'), ac.signal, 1000);
    await dispatchAnswer(p, get('/growing'), ac.signal, 1000);
    await dispatchAnswer(p, get('/declared-large'), ac.signal, 1000);
    expect(getEventListeners(ac.signal, 'abort')).toHaveLength(0);
  });

  it('a dispatcher that cannot take the request rejects instead of leaving the call waiting', async () => {
    const p = new Pool(origin);
    await p.close();
    await expect(dispatchAnswer(p, get('/json'), undefined, 1000)).rejects.toThrow();
  });
});
