import { afterEach, describe, expect, it } from 'vitest';
import { HttpServer } from '../../../src/observe/http-server.js';
import { readBody } from '../../../src/util/http-helpers.js';
import { rawHttp } from '../../helpers/raw-http.js';

// readBody's own deadline, on a real socket: a client trickling its body is cut, not held
// until Node's 300 s requestTimeout.

/** Writes `head` (and `body`, if any) on a raw socket, then waits for the server to answer and close it. */
const raw = async (port: number, head: string, body = '') => ({ status: (await rawHttp(port, `${head}\r\n\r\n${body}`)).status, closed: true });

describe('readBody deadline', () => {
  const servers: HttpServer[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.close();
  });

  it("ends a body still arriving at the deadline with 'timeout': the caller answers 408 and the socket closes", async () => {
    const http = new HttpServer();
    servers.push(http);
    const { port } = await http.listen('127.0.0.1', 0);
    const seen: Array<number | string> = [];
    http.route('POST', '/b', async (req, res) => {
      const body = await readBody(req, 1024, 150);
      seen.push(typeof body === 'string' ? body : body.length);
      if (body === 'timeout') return void res.writeHead(408, { connection: 'close' }).end();
      res.writeHead(body === 'too_large' ? 413 : 200, { connection: 'close' }).end();
    });
    // 10 of the 100 declared bytes, then nothing: the socket stays open on the client's side.
    expect(await raw(port, `POST /b HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Length: 100`, '0123456789')).toEqual({ status: 408, closed: true });
    expect(seen).toEqual(['timeout']);
    // A body that is all there well before the deadline is read as before.
    expect(await raw(port, `POST /b HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Length: 10`, '0123456789')).toEqual({ status: 200, closed: true });
    expect(seen).toEqual(['timeout', 10]);
  });
});
