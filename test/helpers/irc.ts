import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach } from 'vitest';
import { waitFor } from './daemon.js';
import { freePort, spawnServer } from './servers.js';

/** Debian's ngIRCd; the IRC tests skip with this reason where it is not installed (CI installs it). */
export const NGIRCD = '/usr/sbin/ngircd';
export const ngircdMissing = existsSync(NGIRCD) ? undefined : `${NGIRCD} is not installed (apt-get install ngircd)`;

/** The test server's IRC operator (`OPER name password`). */
export const OPER = { name: 'testop', password: 'op-secret' };

export interface Ngircd {
  port: number;
  password: string;
  /** Log lines ngIRCd wrote (stderr, with -n). */
  log: string[];
  stop(): Promise<void>;
}

/** A real ngIRCd on 127.0.0.1, its config and nothing else in a temp dir, with a server password. */
export async function startNgircd(): Promise<Ngircd> {
  const dir = mkdtempSync(join(tmpdir(), 'channeld-ngircd-'));
  const port = await freePort();
  const password = 'irc-test-pass';
  const conf = join(dir, 'ngircd.conf');
  writeFileSync(
    conf,
    [
      '[Global]',
      'Name = irc.test',
      'Info = channeld test server',
      'AdminInfo1 = channeld tests',
      'AdminEMail = tests@localhost',
      'Listen = 127.0.0.1',
      `Ports = ${port}`,
      'MotdPhrase = channeld test',
      `Password = ${password}`,
      '[Limits]',
      'MaxNickLength = 9',
      // Every test user and bot comes from 127.0.0.1.
      'MaxConnectionsIP = 0',
      // An IRC operator (OPER) may KILL a connection: how a test drops the bot's link.
      '[Operator]',
      `Name = ${OPER.name}`,
      `Password = ${OPER.password}`,
      '[Options]',
      'DNS = no',
      'Ident = no',
      'PAM = no',
      '',
    ].join('\n'),
  );
  const server = await spawnServer(NGIRCD, ['-n', '-f', conf], 'ready');
  return {
    port,
    password,
    log: server.log,
    stop: async () => {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface Privmsg {
  from: string;
  target: string;
  text: string;
  /** The whole line as the server sent it (without CRLF), to measure its bytes. */
  raw: string;
}

/** A person on IRC: a minimal raw client that registers, joins, talks, kicks and records what it is sent. */
export class IrcUser {
  readonly lines: string[] = [];
  readonly privmsgs: Privmsg[] = [];
  #socket!: Socket;
  #buf = '';

  constructor(
    readonly nick: string,
    private readonly port: number,
    private readonly password: string,
  ) {}

  async connect(): Promise<this> {
    this.#socket = connect(this.port, '127.0.0.1');
    this.#socket.setEncoding('utf8');
    this.#socket.on('error', () => {});
    this.#socket.on('data', (d: string) => {
      this.#buf += d;
      const parts = this.#buf.split('\r\n');
      this.#buf = parts.pop()!;
      for (const raw of parts) {
        this.lines.push(raw);
        if (raw.startsWith('PING')) this.#socket.write(`PONG ${raw.slice(5)}\r\n`);
        const m = /^:([^! ]+)!\S+ PRIVMSG (\S+) :(.*)$/.exec(raw);
        if (m) this.privmsgs.push({ from: m[1]!, target: m[2]!, text: m[3]!, raw });
      }
    });
    this.send(`PASS ${this.password}`, `NICK ${this.nick}`, `USER ${this.nick} 0 * :test user`);
    await waitFor(() => this.lines.some((l) => / 001 /.test(l)), 10_000);
    return this;
  }

  send(...lines: string[]): void {
    for (const l of lines) this.#socket.write(`${l}\r\n`);
  }

  async join(channel: string): Promise<void> {
    this.send(`JOIN ${channel}`);
    await waitFor(() => this.lines.some((l) => l.includes(` 366 ${this.nick} ${channel} `)), 10_000);
  }

  say(target: string, text: string): void {
    this.send(`PRIVMSG ${target} :${text}`);
  }

  /** What `from` said to `target` (a channel, or this user for a private message). */
  texts(from: string, target = this.nick): string[] {
    return this.privmsgs.filter((p) => p.from === from && p.target.toLowerCase() === target.toLowerCase()).map((p) => p.text);
  }

  close(): void {
    this.send('QUIT :bye');
    this.#socket.end();
  }
}

/** What `ngircdPerSuite` gives a describe block's tests. */
export interface IrcSuite {
  /** The block's ngIRCd, started before its first test. */
  readonly irc: Ngircd;
  /** This test's: its abort ends the bot's listener; aborted when the test ends. */
  readonly stop: AbortController;
  /** A person connected as `nick` (in `room` where given), closed when the test ends. */
  user(nick: string, room?: string): Promise<IrcUser>;
}

/**
 * Call inside a describe block: one real ngIRCd for all its tests, stopped after the last, and
 * per test a fresh `stop` and the test's users, ended after each test. Each test should use
 * nicks of its own: a user or bot closed at the end of the test before may not be gone yet.
 */
export function ngircdPerSuite(): IrcSuite {
  let irc: Ngircd | undefined;
  let stop = new AbortController();
  let users: IrcUser[] = [];
  beforeAll(async () => {
    irc = await startNgircd();
  });
  afterAll(async () => {
    await irc?.stop();
  });
  beforeEach(() => {
    stop = new AbortController();
    users = [];
  });
  afterEach(() => {
    stop.abort(new Error('test over'));
    for (const u of users) u.close();
  });
  const started = (): Ngircd => {
    if (!irc) throw new Error('ngIRCd is not started: use it in a test of the block that called ngircdPerSuite');
    return irc;
  };
  return {
    get irc() {
      return started();
    },
    get stop() {
      return stop;
    },
    user: async (nick, room) => {
      const u = new IrcUser(nick, started().port, started().password);
      users.push(u);
      await u.connect();
      if (room) await u.join(room);
      return u;
    },
  };
}
