import { connect, type Socket } from 'node:net';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { HttpServer } from '../../../src/observe/http-server.js';
import { openEventStream, sendJson } from '../../../src/util/http-helpers.js';
import { scaled } from '../../helpers/timing.js';

// An upgrade's old process stops accepting while clients hold keep-alive connections to it
// (a health poller, a platform's webhook client). Real sockets on 127.0.0.1.

/** One raw keep-alive connection: requests go out one at a time, each answer read whole. */
class RawClient {
  readonly socket: Socket;
  #buffer = '';
  #closed = false;
  readonly closed: Promise<void>;

  constructor(port: number) {
    this.socket = connect(port, '127.0.0.1');
    this.socket.setEncoding('utf8');
    this.socket.on('data', (d: string) => (this.#buffer += d));
    this.socket.on('error', () => {});
    this.closed = once(this.socket, 'close').then(() => void (this.#closed = true));
  }

  /** Sends GET `path` and resolves with the answer's head, or rejects when the server closed the connection without one. */
  async get(path: string): Promise<{ status: number; head: string }> {
    this.#buffer = '';
    this.socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n`);
    for (;;) {
      const end = this.#buffer.indexOf('\r\n\r\n');
      if (end >= 0) {
        const head = this.#buffer.slice(0, end);
        const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0);
        if (this.#buffer.length >= end + 4 + length) return { status: Number(head.split(' ')[1]), head: head.toLowerCase() };
      }
      if (this.#closed) throw new Error(`the server closed the connection without an answer to ${path}`);
      await Promise.race([once(this.socket, 'data'), this.closed]);
    }
  }
}

/** Whether drained() resolves on its own (not by its signal) within a few seconds. */
async function drainsOnItsOwn(http: HttpServer): Promise<boolean> {
  const never = new AbortController();
  const late = sleep(scaled(3000), false, { ref: false });
  return Promise.race([http.drained(never.signal).then(() => true), late]);
}

describe('HttpServer after stopAccepting (an upgrade hands its socket over)', () => {
  const servers: HttpServer[] = [];
  const clients: RawClient[] = [];
  afterEach(async () => {
    for (const c of clients.splice(0)) c.socket.destroy();
    for (const s of servers.splice(0)) await s.close();
  });

  async function serve(): Promise<{ http: HttpServer; client: () => RawClient }> {
    const http = new HttpServer();
    servers.push(http);
    http.route('GET', '/healthz', (_req, res) => sendJson(res, 200, { ok: true }));
    const { port } = await http.listen('127.0.0.1', 0);
    const client = () => {
      const c = new RawClient(port);
      clients.push(c);
      return c;
    };
    return { http, client };
  }

  it('an idle keep-alive connection still gets its next answer, which closes it; drained() resolves once it closed', async () => {
    const { http, client } = await serve();
    const c = client();
    expect((await c.get('/healthz')).head).not.toContain('connection: close');
    http.stopAccepting();
    // The connection was idle at the stop: a client may be sending its next request on it.
    const answer = await c.get('/healthz');
    expect(answer.status).toBe(200);
    expect(answer.head).toContain('connection: close');
    await c.closed;
    expect(await drainsOnItsOwn(http)).toBe(true);
  });

  it('a path whose route went with the hand-over is 503 with Retry-After there, not 404', async () => {
    const { http, client } = await serve();
    const c = client();
    expect((await c.get('/webhooks/tg')).status).toBe(404);
    http.stopAccepting();
    const answer = await c.get('/webhooks/tg');
    expect(answer.status).toBe(503);
    expect(answer.head).toContain('retry-after: 1');
    expect(answer.head).toContain('connection: close');
  });

  it('an answer under way at the stop, its head not sent yet, closes its connection too', async () => {
    const { http, client } = await serve();
    let release!: () => void;
    const entered = new Promise<void>((resolve) => {
      http.route('GET', '/slow', async (_req, res) => {
        resolve();
        await new Promise<void>((r) => (release = r));
        sendJson(res, 200, { ok: true });
      });
    });
    const c = client();
    const answer = c.get('/slow');
    await entered;
    http.stopAccepting();
    release();
    expect((await answer).head).toContain('connection: close');
    await c.closed;
    expect(await drainsOnItsOwn(http)).toBe(true);
  });

  it('an event stream is cut at the stop (its client reconnects to the new process), so it does not hold the drain', async () => {
    const { http, client } = await serve();
    http.route('GET', '/events', (_req, res) => {
      openEventStream(res);
      res.write(': hello\n\n');
    });
    const c = client();
    c.socket.write('GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    await once(c.socket, 'data');
    http.stopAccepting();
    await c.closed;
    expect(await drainsOnItsOwn(http)).toBe(true);
  });

  it('drained() waits for a connection still open, and no longer than its signal', async () => {
    const { http, client } = await serve();
    const c = client();
    await c.get('/healthz');
    http.stopAccepting();
    const stop = new AbortController();
    let done = false;
    const drained = http.drained(stop.signal).then(() => (done = true));
    await new Promise((resolve) => setImmediate(resolve));
    expect(done).toBe(false);
    stop.abort();
    await drained;
    expect(done).toBe(true);
  });

  it('an upgraded connection (a WebSocket) does not hold the drain: its handler ends it', async () => {
    const { http, client } = await serve();
    const held: Socket[] = [];
    http.upgrade('/ws', (_req, socket) => held.push(socket as Socket));
    const c = client();
    c.socket.write('GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n');
    await expect.poll(() => held.length, { timeout: scaled(5000) }).toBe(1);
    http.stopAccepting();
    expect(await drainsOnItsOwn(http)).toBe(true);
    expect(c.socket.destroyed).toBe(false);
    held[0]!.destroy();
  });
});
