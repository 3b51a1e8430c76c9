import { connect, createServer, type Server, type Socket } from 'node:net';

/** Longest client line passed on (a CONNECT with its JSON); past it the proxy gives up on the connection. */
const MAX_LINE_BYTES = 64 * 1024;

/** A publish the proxy lost: its subject and payload (with an HPUB, its headers first). */
export interface Dropped {
  subject: string;
  payload: string;
}

interface Drop {
  prefix: string;
  resolve(dropped: Dropped): void;
}

interface Hold {
  prefix: string;
  /** Set once a publish is held: sends it on. */
  held?: () => void;
  reached: () => void;
}

/** A publish held on its way until released. */
export interface HeldPublish {
  /** Resolves once a matching publish is held. */
  readonly reached: Promise<void>;
  /** Sends it on (and lets later matching ones pass). */
  release(): void;
}

/**
 * A TCP proxy in front of a NATS server that can lose one client publish on its way, as a
 * route or a stream leader's change can lose a JetStream pull request in a NATS cluster;
 * everything else passes untouched. It reads only the client's side of the protocol: each
 * operation is one line (CONNECT, SUB, UNSUB, PING, PONG), and PUB and HPUB lines are
 * followed by a payload of the length their last field declares. Plain TCP only, and the
 * URL it gives carries no credentials: the tests' NATS has neither TLS nor auth.
 */
export class NatsProxy {
  readonly #server: Server = createServer((client) => this.#pipe(client));
  readonly #sockets = new Set<Socket>();
  readonly #drops: Drop[] = [];
  readonly #holds: Hold[] = [];
  #upstream = { host: '127.0.0.1', port: 4222 };

  /** Listens on a loopback port in front of `upstreamUrl` (nats://host:port). */
  async start(upstreamUrl: string): Promise<this> {
    const u = new URL(upstreamUrl);
    this.#upstream = { host: u.hostname, port: Number(u.port || 4222) };
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    return this;
  }

  /** The URL a client connects to instead of the server's. */
  get url(): string {
    const a = this.#server.address();
    if (!a || typeof a === 'string') throw new Error('the proxy is not listening');
    return `nats://127.0.0.1:${a.port}`;
  }

  /** Loses the next publish whose subject starts with `prefix`; resolves with it once it has. */
  dropNext(prefix: string): Promise<Dropped> {
    return new Promise((resolve) => this.#drops.push({ prefix, resolve }));
  }

  /** Holds the next publish whose subject starts with `prefix` until `release()`, as a slow server would. */
  holdNext(prefix: string): HeldPublish {
    let reached!: () => void;
    const h: Hold = { prefix, reached: () => {} };
    const atReach = new Promise<void>((r) => (reached = r));
    h.reached = reached;
    this.#holds.push(h);
    return {
      reached: atReach,
      release: () => {
        this.#holds.splice(this.#holds.indexOf(h), 1);
        h.held?.();
      },
    };
  }

  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #pipe(client: Socket): void {
    const server = connect(this.#upstream);
    for (const s of [client, server]) {
      this.#sockets.add(s);
      s.on('close', () => this.#sockets.delete(s));
      // Either side going away ends the pair, as a broken route would.
      s.on('error', () => (client.destroy(), server.destroy()));
      s.on('close', () => (client.destroy(), server.destroy()));
    }
    server.pipe(client);
    let pending: Buffer = Buffer.alloc(0);
    client.on('data', (chunk: Buffer) => {
      pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
      for (;;) {
        const eol = pending.indexOf('\r\n');
        if (eol < 0) {
          if (pending.length > MAX_LINE_BYTES) client.destroy();
          return;
        }
        const line = pending.subarray(0, eol).toString('latin1');
        const [op = '', subject = '', ...rest] = line.split(/\s+/);
        const isPub = /^h?pub$/i.test(op);
        const payloadBytes = isPub ? Number(rest.at(-1)) : 0;
        // Not the protocol: the proxy cannot tell where the next operation starts.
        if (!Number.isInteger(payloadBytes) || payloadBytes < 0) return void client.destroy();
        const frameBytes = eol + 2 + (isPub ? payloadBytes + 2 : 0);
        if (pending.length < frameBytes) return;
        const frame = pending.subarray(0, frameBytes);
        pending = pending.subarray(frameBytes);
        const hold = isPub ? this.#holds.find((h) => !h.held && subject.startsWith(h.prefix)) : undefined;
        if (hold) {
          // Later frames pass it: a held request is one the server answers late.
          const copy = Buffer.from(frame);
          hold.held = () => void (server.destroyed || server.write(copy));
          hold.reached();
          continue;
        }
        const drop = isPub ? this.#drops.findIndex((d) => subject.startsWith(d.prefix)) : -1;
        if (drop < 0) server.write(frame);
        else this.#drops.splice(drop, 1)[0]!.resolve({ subject, payload: frame.subarray(eol + 2, eol + 2 + payloadBytes).toString('utf8') });
      }
    });
  }
}
