import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { HttpServer } from '../../../src/observe/http-server.js';
import { waitFor } from '../../helpers/daemon.js';
import { rawHttp } from '../../helpers/raw-http.js';

// What one client can send before any check: neither may end the daemon's process.

/** Writes `text`, resets the connection on the answer's first byte, resolves with what came. */
function sendThenReset(port: number, text: string): Promise<string> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1', () => s.write(text));
    let got = '';
    s.on('data', (d) => {
      got += d.toString('latin1');
      s.resetAndDestroy();
    });
    s.on('error', () => {});
    s.on('close', () => resolve(got));
  });
}

describe('HttpServer and a hostile client', () => {
  let server: HttpServer;
  let port: number;
  const errors: unknown[] = [];
  const record = (e: unknown) => errors.push(e);
  afterEach(async () => {
    process.off('uncaughtException', record);
    process.off('unhandledRejection', record);
    errors.length = 0;
    await server.close();
  });
  const start = async () => {
    process.on('uncaughtException', record);
    process.on('unhandledRejection', record);
    server = new HttpServer();
    server.route('GET', '/healthz', (_req, res) => void res.writeHead(200).end('ok'));
    ({ port } = await server.listen('127.0.0.1', 0));
  };

  it('a request target that is not a URL is 400, plain or as an upgrade; the server answers on', async () => {
    await start();
    const host = `Host: 127.0.0.1:${port}`;
    // Before: new URL() threw outside any catch (an unhandled rejection, an uncaught throw in 'upgrade').
    expect((await rawHttp(port, `GET //[ HTTP/1.1\r\n${host}\r\nConnection: close\r\n\r\n`)).status).toBe(400);
    expect((await rawHttp(port, `GET http://a%zz/ HTTP/1.1\r\n${host}\r\nConnection: close\r\n\r\n`)).status).toBe(400);
    expect((await rawHttp(port, `GET //[ HTTP/1.1\r\n${host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n`)).status).toBe(400);
    expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
    expect(errors).toEqual([]);
  });

  it('a refused upgrade (403, 404) whose client resets the connection on the answer raises nothing', async () => {
    await start();
    const upgrade = (path: string, host: string) => `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n`;
    expect(await sendThenReset(port, upgrade('/chat', 'evil.example'))).toMatch(/^HTTP\/1.1 403/);
    expect(await sendThenReset(port, upgrade('/nowhere', `127.0.0.1:${port}`))).toMatch(/^HTTP\/1.1 404/);
    // The reset reaches the server's socket after the answer: its error, if unheard, comes then.
    await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/healthz`)).status === 200 && errors.length === 0);
    await new Promise((r) => setImmediate(r));
    expect(errors).toEqual([]);
  });
});
