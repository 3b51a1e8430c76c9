import { once } from 'node:events';
import { type AddressInfo, createServer, type Server } from 'node:net';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { IrcConnection, MAX_CAP_LS_BYTES, MAX_CAP_LS_LINES } from '../../../channels/irc/connection.js';
import { parseLine } from '../../../channels/irc/protocol.js';
import { waitFor } from '../../helpers/daemon.js';
import { scaled } from '../../helpers/timing.js';

/**
 * IRCv3 capability negotiation (CAP LS 302): the server's list may span several lines, each
 * but the last with `*` before its list (Ergo puts `sasl=...` on the first line). ngIRCd offers
 * no SASL, so a scripted server on a real TCP socket speaks the documented lines here: it
 * answers each line the client sends with the lines a SASL server sends, and records them all
 * as command and parameters (so `CAP END` and `CAP :END` read the same).
 */
const PASSWORD = 'sasl-secret';
const PLAIN = Buffer.from(`bot\0bot\0${PASSWORD}`).toString('base64');
const REGISTRATION = ['CAP LS 302', `PASS ${PASSWORD}`, 'NICK bot', 'USER bot 0 * channeld'];

interface Scripted {
  conn: IrcConnection;
  /** Every line the client sent, in order. */
  heard: string[];
  /** Every line the server sent, in order. */
  said: string[];
  warnings: string[];
  registered: Promise<unknown>;
}

const open: { server: Server; conn: IrcConnection; stop: AbortController }[] = [];

afterEach(() => {
  for (const { server, conn, stop } of open.splice(0)) {
    stop.abort(new Error('test over'));
    conn.close('test done');
    server.close();
  }
});

/** A server that answers `CAP LS 302` with `capLs`, then goes through SASL PLAIN; 001 follows `CAP END`. */
async function scripted(capLs: string[]): Promise<Scripted> {
  const heard: string[] = [];
  const said: string[] = [];
  const server = createServer((s) => {
    s.setEncoding('utf8');
    const say = (...lines: string[]) => {
      said.push(...lines);
      s.write(lines.map((l) => `${l}\r\n`).join(''));
    };
    let buf = '';
    s.on('data', (d: string) => {
      buf += d;
      const parts = buf.split('\r\n');
      buf = parts.pop()!;
      for (const raw of parts) {
        const parsed = parseLine(raw);
        const line = parsed ? [parsed.command, ...parsed.params].join(' ') : raw;
        heard.push(line);
        if (line === 'CAP LS 302') say(...capLs);
        else if (line === 'CAP REQ sasl') say(':s CAP * ACK :sasl');
        else if (line === 'AUTHENTICATE PLAIN') say('AUTHENTICATE +');
        else if (line === `AUTHENTICATE ${PLAIN}`) say(':s 900 bot bot!bot@h bot :You are now logged in as bot', ':s 903 bot :SASL authentication successful');
        else if (line.startsWith('AUTHENTICATE ')) say(':s 904 bot :SASL authentication failed');
        else if (line === 'CAP END') say(':s 001 bot :Welcome');
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const warnings: string[] = [];
  const log = pino({ level: 'warn' }, { write: (s: string) => void warnings.push(JSON.parse(s).msg) });
  const conn = new IrcConnection({
    host: '127.0.0.1',
    port: (server.address() as AddressInfo).port,
    tls: false,
    nick: 'bot',
    password: PASSWORD,
    connectTimeoutMs: scaled(5000),
    log,
    channelId: 'irc',
  });
  const stop = new AbortController();
  open.push({ server, conn, stop });
  return { conn, heard, said, warnings, registered: conn.register(stop.signal) };
}

/** A round trip: TCP keeps order, so once the server has this line it has every line the client sent before it. */
async function synced(h: Scripted): Promise<void> {
  h.conn.write('PING :sync');
  await waitFor(() => h.heard.includes('PING sync'), 5000);
}

describe('IRC CAP LS over several lines', () => {
  it('gathers every line of the list: sasl on the first of two lines is requested, and SASL PLAIN logs in', async () => {
    const h = await scripted([':s CAP * LS * :sasl=PLAIN,EXTERNAL', ':s CAP * LS :multi-prefix']);
    await h.registered;
    await synced(h);
    expect(h.heard).toEqual([...REGISTRATION, 'CAP REQ sasl', 'AUTHENTICATE PLAIN', `AUTHENTICATE ${PLAIN}`, 'CAP END', 'PING sync']);
    // The welcome came after the server said the account logged in.
    expect(h.said.slice(-2)).toEqual([':s 903 bot :SASL authentication successful', ':s 001 bot :Welcome']);
    expect(h.warnings).toEqual([]);
  });

  it('gathers at most MAX_CAP_LS_LINES lines: past them it goes on with what it has, once, and logs it', async () => {
    const lines = Array.from({ length: MAX_CAP_LS_LINES }, (_, i) => `:s CAP * LS * :cap${i}`);
    // sasl comes only after the bound, so it is never seen; the last line does not get a second answer.
    const h = await scripted([...lines, ':s CAP * LS * :sasl', ':s CAP * LS :last']);
    await h.registered;
    await synced(h);
    expect(h.heard).toEqual([...REGISTRATION, 'CAP END', 'PING sync']);
    expect(h.warnings).toEqual(['IRC CAP LS reply has too many lines; going on with the capabilities gathered']);
  });

  it('gathers at most MAX_CAP_LS_BYTES of lists: a line that would pass them is not taken, and SASL goes on', async () => {
    const filler = (tag: string) => Array.from({ length: Math.ceil(MAX_CAP_LS_BYTES / 2 / 5) }, (_, i) => `${tag}${String(i).padStart(4, '0')}`).join(' ');
    const h = await scripted([`:s CAP * LS * :sasl ${filler('a')}`, `:s CAP * LS * :${filler('b')}`, ':s CAP * LS :last']);
    await h.registered;
    await synced(h);
    expect(h.heard).toEqual([...REGISTRATION, 'CAP REQ sasl', 'AUTHENTICATE PLAIN', `AUTHENTICATE ${PLAIN}`, 'CAP END', 'PING sync']);
    expect(h.warnings).toEqual(['IRC CAP LS reply too long; going on with the capabilities gathered']);
  });
});
