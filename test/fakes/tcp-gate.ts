import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP forwarder on a loopback port that can be shut like a network outage: while down it
 * cuts every connection it carries and every new one at once, as a server that went away or
 * a firewall that resets would; muted, it loses the server's answers. Plain bytes both ways
 * (no backpressure: test traffic is small); it reads nothing.
 */
export class TcpGate {
  readonly #server: Server = createServer((client) => this.#pipe(client));
  readonly #sockets = new Set<Socket>();
  #upstream = { host: '127.0.0.1', port: 0 };
  #down = false;
  #muted = false;

  /** Listens on a loopback port in front of `host:port`. */
  async start(host: string, port: number): Promise<this> {
    this.#upstream = { host, port };
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    return this;
  }

  /** The port clients connect to instead of the upstream's. */
  get port(): number {
    const a = this.#server.address();
    if (!a || typeof a === 'string') throw new Error('the gate is not listening');
    return a.port;
  }

  /** Cuts every connection and refuses new ones until `up()`. */
  down(): void {
    this.#down = true;
    for (const s of this.#sockets) s.destroy();
  }

  up(): void {
    this.#down = false;
    this.#muted = false;
  }

  /**
   * Drops what the server sends from now on while the client's bytes still go through: a
   * request the server carries out whose answer never arrives (then `down()` cuts the
   * connection, as a network that failed at that moment would).
   */
  mute(): void {
    this.#muted = true;
  }

  async close(): Promise<void> {
    this.down();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #pipe(client: Socket): void {
    if (this.#down) {
      client.destroy();
      return;
    }
    const server = connect(this.#upstream);
    for (const [a, b, fromServer] of [
      [client, server, false],
      [server, client, true],
    ] as const) {
      this.#sockets.add(a);
      a.on('data', (chunk: Buffer) => {
        if (!(fromServer && this.#muted)) b.write(chunk);
      });
      a.on('error', () => b.destroy());
      a.on('close', () => {
        this.#sockets.delete(a);
        b.destroy();
      });
    }
  }
}
