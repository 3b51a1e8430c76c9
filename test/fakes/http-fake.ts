import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/**
 * The HTTP server under a platform fake: on a free loopback port, with its open sockets
 * tracked, so `close` (and a test's dropped connection) cuts long polls too.
 */
export class FakeHttpServer {
  url = '';
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();

  constructor(handle: (req: IncomingMessage, res: ServerResponse) => Promise<void>) {
    this.#server = createServer((req, res) => void handle(req, res).catch(() => res.destroy()));
    this.#server.on('connection', (s) => {
      this.#sockets.add(s);
      s.on('close', () => this.#sockets.delete(s));
    });
  }

  async listen(): Promise<string> {
    await new Promise<void>((r) => this.#server.listen(0, '127.0.0.1', () => r()));
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
    return this.url;
  }

  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((r) => this.#server.close(() => r()));
  }
}
