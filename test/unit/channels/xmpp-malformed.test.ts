import { createHash, createHmac, pbkdf2Sync, randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type Socket } from 'node:net';
import pino from 'pino';
import { describe, expect, it, type TestContext } from 'vitest';
import { XmppAdapter } from '../../../channels/xmpp/adapter.js';
import { waitFor } from '../../helpers/daemon.js';

const DOMAIN = 'localhost';
const PASSWORD = 'pw-malformed-1';
const NS_STREAM = 'http://etherx.jabber.org/streams';
const NS_SASL = 'urn:ietf:params:xml:ns:xmpp-sasl';
const NS_BIND = 'urn:ietf:params:xml:ns:xmpp-bind';

/** One client connection as the server sees it: everything the client wrote, and how far it was read. */
interface Conn {
  socket: Socket;
  received: string;
  read: number;
  /** The client ended its side (TCP FIN). */
  ended: boolean;
  /** Closed on the server's side too: by the server, or by the reset a write to a closed socket gets. */
  closed: boolean;
  send(data: string): void;
}

const b64 = (s: string | Buffer) => Buffer.from(s).toString('base64');
const hmac = (key: Buffer, data: string) => createHmac('sha1', key).update(data).digest();

/**
 * A raw XMPP server on 127.0.0.1, just enough of RFC 6120 for @xmpp/client to get online:
 * stream headers, SASL SCRAM-SHA-1 (RFC 5802, the proof checked against PASSWORD; @xmpp/client
 * takes PLAIN only over TLS), the stream restart and resource binding. No TLS, no stream
 * management. Past binding it sends only what a test writes with `conn.send`, and answers the
 * client's closing tag with its own and the end of the connection (§4.4), while
 * `closesWithClient`; otherwise it never closes a connection: a server that streams on.
 */
class RawXmppServer {
  readonly conns: Conn[] = [];
  readonly #server = createServer({ allowHalfOpen: true }, (socket) => this.#accept(socket));

  /** Set: the next logins are refused with this SASL condition (RFC 6120 §6.5), whatever the proof. */
  saslFailure: string | undefined;

  constructor(public closesWithClient: boolean) {}

  async start(): Promise<number> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    const a = this.#server.address();
    if (!a || typeof a === 'string') throw new Error('not listening');
    return a.port;
  }

  async close(): Promise<void> {
    for (const c of this.conns) c.socket.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #accept(socket: Socket): void {
    const conn: Conn = {
      socket,
      received: '',
      read: 0,
      ended: false,
      closed: false,
      send: (data) => void (socket.writable && socket.write(data)),
    };
    this.conns.push(conn);
    socket.setEncoding('utf8');
    socket.on('error', () => {});
    socket.on('close', () => (conn.closed = true));
    socket.on('end', () => {
      conn.ended = true;
      if (this.closesWithClient) socket.end();
    });
    const steps = this.#negotiation(conn);
    let step = steps.next();
    socket.on('data', (data: string) => {
      conn.received += data;
      // Each step waits for one element of the client's; the first step's is already there.
      while (!step.done) {
        const m = new RegExp(step.value, 's').exec(conn.received.slice(conn.read));
        if (!m) break;
        conn.read += m.index + m[0].length;
        step = steps.next(m);
      }
      if (step.done && this.closesWithClient && conn.received.includes('</stream:stream>', conn.read)) {
        conn.send('</stream:stream>');
        socket.end();
      }
    });
  }

  /** Yields the pattern of what it waits for next, and answers what matched it. */
  *#negotiation(conn: Conn): Generator<string, void, RegExpExecArray> {
    const header = (id: string) =>
      `<?xml version='1.0'?><stream:stream xmlns='jabber:client' xmlns:stream='${NS_STREAM}' id='${id}' from='${DOMAIN}' version='1.0' xml:lang='en'>`;
    yield '<stream:stream[^>]*>';
    conn.send(`${header('s1')}<stream:features><mechanisms xmlns='${NS_SASL}'><mechanism>SCRAM-SHA-1</mechanism></mechanisms></stream:features>`);

    const auth = yield '<auth [^>]*mechanism="SCRAM-SHA-1"[^>]*>([^<]*)</auth>';
    if (this.saslFailure) {
      conn.send(`<failure xmlns='${NS_SASL}'><${this.saslFailure}/></failure>`);
      return;
    }
    const clientFirst = Buffer.from(auth[1]!, 'base64').toString();
    const clientFirstBare = clientFirst.slice(clientFirst.indexOf(',', clientFirst.indexOf(',') + 1) + 1);
    const cnonce = /(?:^|,)r=([^,]+)/.exec(clientFirstBare)![1]!;
    const salt = randomBytes(16);
    const serverFirst = `r=${cnonce}${randomBytes(12).toString('hex')},s=${salt.toString('base64')},i=4096`;
    conn.send(`<challenge xmlns='${NS_SASL}'>${b64(serverFirst)}</challenge>`);

    const response = yield '<response[^>]*>([^<]*)</response>';
    const clientFinal = Buffer.from(response[1]!, 'base64').toString();
    const withoutProof = clientFinal.slice(0, clientFinal.lastIndexOf(',p='));
    const proof = Buffer.from(clientFinal.slice(clientFinal.lastIndexOf(',p=') + 3), 'base64');
    const salted = pbkdf2Sync(PASSWORD, salt, 4096, 20, 'sha1');
    const clientKey = hmac(salted, 'Client Key');
    const authMessage = `${clientFirstBare},${serverFirst},${withoutProof}`;
    const signature = hmac(createHash('sha1').update(clientKey).digest(), authMessage);
    const expected = Buffer.from(clientKey.map((byte, i) => byte ^ signature[i]!));
    if (proof.length !== expected.length || !timingSafeEqual(proof, expected)) {
      conn.send(`<failure xmlns='${NS_SASL}'><not-authorized/></failure></stream:stream>`);
      return;
    }
    conn.send(`<success xmlns='${NS_SASL}'>${b64(`v=${hmac(hmac(salted, 'Server Key'), authMessage).toString('base64')}`)}</success>`);

    yield '<stream:stream[^>]*>';
    conn.send(`${header('s2')}<stream:features><bind xmlns='${NS_BIND}'/></stream:features>`);

    const bind = yield `<iq [^>]*id="([^"]+)"[^>]*><bind xmlns="${NS_BIND}"><resource>([^<]+)</resource></bind></iq>`;
    conn.send(`<iq type='result' id='${bind[1]}'><bind xmlns='${NS_BIND}'><jid>bot@${DOMAIN}/${bind[2]}</jid></bind></iq>`);
  }
}

/** The channel's adapter as bot@localhost against the raw server on `port`. */
const botOn = (port: number, log: pino.Logger) =>
  new XmppAdapter({
    id: 'xmpp',
    local: 'bot',
    domain: DOMAIN,
    password: PASSWORD,
    service: `xmpp://127.0.0.1:${port}`,
    rooms: [],
    // The login's own bound, not what these tests are about: wide, for a machine under load (a
    // CI run with a CPU burner took over 5 s for five logins at once).
    connectTimeoutMs: 30_000,
    log,
  });

/** The channel's adapter online as bot@localhost against a raw server, with what it logs, reports and delivers. */
async function online({ onTestFinished }: TestContext, closesWithClient: boolean) {
  const server = new RawXmppServer(closesWithClient);
  const port = await server.start();
  const logs: Array<{ level: number; msg: string; reason?: string }> = [];
  const log = pino({ level: 'info' }, { write: (s: string) => void logs.push(JSON.parse(s)) });
  const adapter = botOn(port, log);
  const delivered: string[] = [];
  const reconnecting: string[] = [];
  let connected = 0;
  const stop = new AbortController();
  const listening = adapter.listen(
    async (m) => (delivered.push(m.text), true),
    stop.signal,
    () => connected++,
    (reason) => reconnecting.push(reason),
  );
  // A listener that ends before the test does (a login past its bound) fails the test through its
  // waits; its rejection is not left unhandled meanwhile.
  listening.catch(() => {});
  onTestFinished(async () => {
    // Answered, the client's close is over at once.
    server.closesWithClient = true;
    stop.abort();
    await listening.catch(() => {});
    await server.close();
  });
  await waitFor(() => connected === 1, 15_000);
  return { server, conn: server.conns[0]!, logs, delivered, reconnecting, connections: () => connected, stop, listening };
}

const chat = (id: string, body: string) => `<message from='alice@${DOMAIN}/phone' to='bot@${DOMAIN}' type='chat' id='${id}'><body>${body}</body></message>`;

// Concurrent: most of each test is @xmpp/client's reconnect delay (1 s) and channeld's wait for the server's close (1 s).
describe.concurrent('XMPP: XML from the server that cannot be parsed', () => {
  it.for([
    ['an end tag that does not match', `<message from='alice@${DOMAIN}/phone' type='chat'><body>hi</bdoy>`],
    ['an undefined entity (ltx throws)', chat('e1', 'fish &chips; here')],
    ['two mismatched end tags in one read (the second error has no listener left)', `<message type='chat'><body>x</a></b>`],
  ])('%s, then more data: the stream ends with bad-format, the reason is logged and shown, and it reconnects', async ([_what, malformed], ctx) => {
    // The server never closes its side: what ends the connection is channeld.
    const b = await online(ctx, false);
    b.conn.send(`${chat('ok1', 'before')}${malformed}`);
    await waitFor(() => b.conn.received.includes('<bad-format'), 10_000);
    // A second read after the parser was let go of: the server streaming on.
    b.conn.send(chat('late', 'streamed on after the error'));
    await waitFor(() => b.connections() === 2, 15_000);

    expect(b.server.conns).toHaveLength(2);
    expect(b.conn.ended).toBe(true);
    // The first socket was destroyed, not just let go of: streaming on (whitespace, as
    // keepalives are) gets a reset.
    await waitFor(() => (b.conn.send(' '), b.conn.closed), 5000);
    expect(b.delivered).toEqual(['before']);
    const notWellFormed = b.logs.filter((l) => l.msg.startsWith('XMPP stream not well-formed'));
    expect(notWellFormed).toEqual([expect.objectContaining({ level: 40, reason: expect.stringMatching(/^XMPP: the server sent XML that cannot be parsed/) })]);
    expect(b.reconnecting).toEqual([expect.stringMatching(/^XMPP: the server sent XML that cannot be parsed \(.+\); the connection was ended \(bad-format\)/)]);

    // The new stream reads as before.
    b.server.conns[1]!.send(chat('ok2', 'after'));
    await waitFor(() => b.delivered.length === 2, 10_000);
    expect(b.delivered).toEqual(['before', 'after']);
  });

  it('the server closes its stream and streams on: the rest is ignored, the client closes its side and reconnects', async (ctx) => {
    const b = await online(ctx, false);
    // One write, several socket reads (64 KiB each): the reads after the first come once the
    // parser was let go of.
    const late = Array.from({ length: 2000 }, (_, i) => chat(`late${i}`, 'streamed on after the close')).join('');
    expect(late.length).toBeGreaterThan(2 * 64 * 1024);
    b.conn.send(`</stream:stream>${late}`);
    await waitFor(() => b.connections() === 2, 15_000);

    expect(b.conn.received).toMatch(/<\/stream:stream>$/);
    expect(b.conn.ended).toBe(true);
    await waitFor(() => (b.conn.send(' '), b.conn.closed), 5000);
    expect(b.delivered).toEqual([]);
    expect(b.logs.map((l) => l.msg)).toEqual(['XMPP stream closed by the server; closing the connection to reconnect']);
    expect(b.reconnecting).toEqual([expect.stringMatching(/^XMPP: the server closed the stream/)]);
  });
  // A channel stopped (a reload, the daemon's stop) while its server never answers the close:
  // the library waits 2 s for the server's end, longer than the stop waits, and let go of the
  // socket with nothing listening on it. It was left open, and an error on it later (a reset)
  // was an "error" event with no listener: the end of the process.
  it('a channel stopped while the server does not answer its close leaves no socket behind, and a late reset is harmless', async (ctx) => {
    const b = await online(ctx, false);
    b.stop.abort();
    await b.listening;
    await waitFor(() => (b.conn.send(' '), b.conn.closed), 5000);
    b.conn.socket.resetAndDestroy();
  });
});

/** The adapter listening against `server` as bot@localhost, and how its listener ended. */
function listenTo({ onTestFinished }: TestContext, server: RawXmppServer, port: number) {
  const adapter = botOn(port, pino({ level: 'silent' }));
  let connected = 0;
  let ended: { err: unknown } | undefined;
  const stop = new AbortController();
  const listening = adapter.listen(
    async () => true,
    stop.signal,
    () => connected++,
  );
  listening.then(
    () => (ended = { err: undefined }),
    (err: unknown) => (ended = { err }),
  );
  onTestFinished(async () => {
    server.closesWithClient = true;
    stop.abort();
    await listening.catch(() => {});
    await server.close();
  });
  return { connections: () => connected, ended: () => ended };
}

// RFC 6120 §6.5.12 (temporary-auth-failure: "try again later") and §6.5.1 (aborted) say
// nothing against the credentials: the listener ends with a retryable error, so the
// supervisor logs in again after its backoff. Refused credentials still stop the channel.
describe.concurrent('XMPP: a login the server refuses', () => {
  it.for([
    ['temporary-auth-failure', 'CHANNEL_UNAVAILABLE', true],
    ['aborted', 'CHANNEL_UNAVAILABLE', true],
    ['not-authorized', 'CHANNEL_AUTH_FAILED', false],
    ['malformed-request', 'CHANNEL_AUTH_FAILED', false],
  ] as const)('%s at the first login: %s, retryable %s', async ([condition, code, retryable], ctx) => {
    const server = new RawXmppServer(true);
    server.saslFailure = condition;
    const b = listenTo(ctx, server, await server.start());
    const { err } = await waitFor(() => b.ended(), 10_000);
    expect(err).toMatchObject({ code, retryable });
    // What @xmpp/client itself made of the server's <failure/>.
    expect((err as Error).cause).toMatchObject({ name: 'SASLError', condition });
    expect(b.connections()).toBe(0);
  });

  it('temporary-auth-failure on a reconnect: the listener ends with a retryable error instead of waiting on a stream that goes nowhere', async (ctx) => {
    const server = new RawXmppServer(true);
    const b = listenTo(ctx, server, await server.start());
    await waitFor(() => b.connections() === 1, 15_000);
    server.saslFailure = 'temporary-auth-failure';
    // The server ends the stream: @xmpp/client reconnects and logs in again.
    server.conns[0]!.send('</stream:stream>');
    const { err } = await waitFor(() => b.ended(), 15_000);
    expect(server.conns).toHaveLength(2);
    expect(err).toMatchObject({ code: 'CHANNEL_UNAVAILABLE', retryable: true, cause: { name: 'SASLError', condition: 'temporary-auth-failure' } });
  });
});
