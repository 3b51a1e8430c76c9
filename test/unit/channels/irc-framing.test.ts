import { once } from 'node:events';
import { type AddressInfo, createServer, type Server, type Socket } from 'node:net';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { IrcConnection } from '../../../channels/irc/connection.js';
import { MAX_INCOMING_LINE_BYTES } from '../../../channels/irc/protocol.js';

/**
 * A real TCP server feeds an IrcConnection chunks of our choosing. To make each chunk its own
 * read without sleeping, the server sends `PING :<token>` and waits for the PONG: the client has
 * then processed everything before it. For a chunk with no LF at all, the warning logged when
 * the unfinished line grows past the limit is the sign instead.
 */
interface Harness {
  conn: IrcConnection;
  seen: string[];
  warnings: string[];
  send: (data: string) => void;
  pong: (token: string) => Promise<void>;
  warned: (count: number) => Promise<void>;
}

const open: { server: Server; conn: IrcConnection }[] = [];

afterEach(() => {
  for (const { server, conn } of open.splice(0)) {
    conn.close('test done');
    server.close();
  }
});

async function harness(): Promise<Harness> {
  let peer!: Socket;
  let fromClient = '';
  const waiters: (() => void)[] = [];
  const poke = () => {
    for (const w of waiters.splice(0)) w();
  };
  const server = createServer((s) => {
    peer = s;
    s.setEncoding('utf8');
    s.once('data', () => s.write(':srv 001 bot :Welcome\r\n'));
    s.on('data', (d: string) => {
      fromClient += d;
      poke();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const warnings: string[] = [];
  const log = pino({ level: 'warn' }, { write: (s: string) => (warnings.push(JSON.parse(s).msg), poke()) });
  const conn = new IrcConnection({
    host: '127.0.0.1',
    port: (server.address() as AddressInfo).port,
    tls: false,
    nick: 'bot',
    password: undefined,
    connectTimeoutMs: 5000,
    log,
    channelId: 'irc',
  });
  open.push({ server, conn });
  await conn.register(new AbortController().signal);
  const seen: string[] = [];
  conn.onLine = (l) => seen.push([l.prefix, l.command, ...l.params].join(' '));
  const until = async (ok: () => boolean) => {
    while (!ok()) await new Promise<void>((r) => waiters.push(r));
  };
  return {
    conn,
    seen,
    warnings,
    send: (data) => peer.write(data),
    pong: (token) => until(() => fromClient.includes(`PONG :${token}\r\n`)),
    warned: (count) => until(() => warnings.length >= count),
  };
}

describe('IRC line framing bound', () => {
  it('discards an overlong line that arrives complete in one chunk, and keeps the lines around it', async () => {
    const h = await harness();
    const head = ':srv PRIVMSG bot :';
    // Exactly at the limit with its CRLF is allowed; one byte more is not.
    const atLimit = `${head}${'a'.repeat(MAX_INCOMING_LINE_BYTES - head.length - 2)}`;
    const overLimit = `${head}${'b'.repeat(MAX_INCOMING_LINE_BYTES - head.length - 1)}`;
    h.send(`${head}before\r\n${overLimit}\r\n${atLimit}\r\n:srv PRIVMSG bot :after\r\nPING :1\r\n`);
    await h.pong('1');
    expect(h.seen).toEqual(['srv PRIVMSG bot before', `srv PRIVMSG bot ${atLimit.slice(head.length)}`, 'srv PRIVMSG bot after']);
    expect(h.warnings).toHaveLength(1);
    expect(h.warnings[0]).toMatch(/longer than allowed/);
  });

  it('discards an overlong line split over three chunks whole, tail included, and parses the next line', async () => {
    const h = await harness();
    h.send(`PING :1\r\n:srv NOTICE bot :${'A'.repeat(4000)}`);
    await h.pong('1');
    h.send(`${'A'.repeat(6000)} `); // now past the limit, still no LF
    await h.warned(1);
    // The tail would read as a forged PRIVMSG if it were framed as a line of its own.
    h.send(':evil!u@h PRIVMSG bot :injected\r\n:ok!u@h PRIVMSG bot :valid\r\nPING :2\r\n');
    await h.pong('2');
    expect(h.seen).toEqual(['ok!u@h PRIVMSG bot valid']);
    expect(h.warnings).toHaveLength(1);
  });

  it('joins a normal line split over chunks', async () => {
    const h = await harness();
    h.send('PING :1\r\n:a!u@h PRIVMSG #c :hel');
    await h.pong('1');
    h.send('lo wor');
    h.send('ld\r');
    h.send('\nPING :2\r\n');
    await h.pong('2');
    expect(h.seen).toEqual(['a!u@h PRIVMSG #c hello world']);
    expect(h.warnings).toEqual([]);
  });
});
