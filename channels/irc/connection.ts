import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import type { Logger } from 'pino';
import { ChannelError } from '../../src/contracts/errors.js';
import { formatLine, type IrcLine, ircLower, MAX_INCOMING_LINE_BYTES, parseLine, parseSource } from './protocol.js';

export interface ConnectionOptions {
  host: string;
  port: number;
  tls: boolean;
  nick: string;
  password: string | undefined;
  connectTimeoutMs: number;
  log: Logger;
  channelId: string;
  /** How often the configured nick is tried again while on another; NICK_RECLAIM_INTERVAL_MS unless a test shortens it. */
  nickReclaimIntervalMs?: number;
}

/** No line from the server for this long: we PING it; no line for twice as long: the link is dead. */
const IDLE_PING_MS = 90_000;

/**
 * A CAP LS 302 reply may span several lines (each but the last says `*` before its list). We
 * gather at most this many lines and bytes of capability lists; past either, registration goes
 * on with what was gathered, so a server cannot hold us (or our memory) with an endless reply.
 */
export const MAX_CAP_LS_LINES = 16;
export const MAX_CAP_LS_BYTES = 8192;

/**
 * While on an alternate nick (the configured one was held at connect, often by our own ghost
 * after a reconnect), NICK <configured> is tried again this often, besides at once when its
 * holder is seen to quit or change nick. One try at a time, so never more than one a period
 * plus one per departure of the holder.
 */
export const NICK_RECLAIM_INTERVAL_MS = 60_000;

/** The nicks tried, in order, while the server answers 433 (nickname in use). */
export function alternateNicks(nick: string): string[] {
  return [nick, `${nick}_`, `${nick}__`, ...Array.from({ length: 9 }, (_, i) => `${nick}${i + 1}`)];
}

/**
 * One registered IRC client connection: TCP or TLS, line framing with a bound, registration
 * (CAP LS over however many lines, SASL PLAIN when the server offers it and a password is set,
 * PASS otherwise, NICK with alternates, USER), PING/PONG both ways, and the configured nick
 * taken back when it was held at connect. Lines after registration go to `onLine`.
 * `closed` rejects with a ChannelError saying why the link ended (never resolves: a
 * connection only ends by failing or by `close`).
 */
export class IrcConnection {
  readonly #o: ConnectionOptions;
  #socket: Socket | undefined;
  /** The unfinished line so far; never more than MAX_INCOMING_LINE_BYTES (see #data). */
  #buffer = '';
  /** Discarding an overlong line: everything up to its next LF, in however many chunks, is dropped. */
  #skipping = false;
  #nick: string;
  #idle: NodeJS.Timeout | undefined;
  #pinged = false;
  #fail!: (err: ChannelError) => void;
  #ended = false;
  /** Registered: lines go to `onLine`, and the configured nick is reclaimed when we are on another. */
  #registered = false;
  #reclaimTimer: NodeJS.Timeout | undefined;
  /** A NICK <configured> is out and not yet answered (by our NICK change or a numeric refusing it). */
  #reclaimPending = false;
  readonly closed: Promise<never>;
  onLine: (line: IrcLine) => void = () => {};

  constructor(options: ConnectionOptions) {
    this.#o = options;
    this.#nick = options.nick;
    this.closed = new Promise<never>((_, reject) => (this.#fail = reject));
    this.closed.catch(() => {});
  }

  /** Our nick now (the server may have given us an alternate; the server's NICK lines for us keep it current). */
  get nick(): string {
    return this.#nick;
  }

  get open(): boolean {
    return !this.#ended && this.#socket !== undefined && !this.#socket.destroyed;
  }

  /** Connects and registers; resolves with the 001 welcome line, rejects with a coded ChannelError. */
  register(signal: AbortSignal): Promise<IrcLine> {
    const { host, port } = this.#o;
    const socket = this.#o.tls ? tlsConnect({ host, port, servername: /^[\d.:]+$/.test(host) ? undefined : host }) : netConnect({ host, port });
    this.#socket = socket;
    socket.setNoDelay(true);
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => this.#data(chunk));
    socket.on('error', (err) => this.#end(new ChannelError('CHANNEL_NETWORK', `IRC ${host}:${port}: ${err.message}`, { cause: err })));
    socket.on('close', () => this.#end(new ChannelError('CHANNEL_NETWORK', `IRC ${host}:${port}: the server closed the connection`)));
    return new Promise<IrcLine>((resolve, reject) => {
      const nicks = alternateNicks(this.#o.nick);
      let sasl = false;
      // CAP LS gathering: the capability names so far, and the lines and bytes they took.
      const caps = new Set<string>();
      let capLines = 0;
      let capBytes = 0;
      let capAnswered = false;
      const answerCaps = () => {
        capAnswered = true;
        sasl = this.#o.password !== undefined && caps.has('sasl');
        this.write(sasl ? formatLine('CAP', 'REQ', 'sasl') : formatLine('CAP', 'END'));
      };
      const timer = setTimeout(
        () => this.#end(new ChannelError('CHANNEL_CONNECT_TIMEOUT', `IRC ${host}:${port}: not registered within ${this.#o.connectTimeoutMs} ms`)),
        this.#o.connectTimeoutMs,
      );
      const onAbort = () => this.close('channeld stopping');
      signal.addEventListener('abort', onAbort, { once: true });
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
      };
      this.closed.catch((err: unknown) => {
        done();
        reject(signal.aborted ? signal.reason : err);
      });
      const auth = (detail: string) =>
        this.#end(new ChannelError('CHANNEL_AUTH_FAILED', `IRC ${host}:${port}: ${detail}; check password_env/password_file/password_credential and nick`));
      this.onLine = (line) => {
        const text = line.params.at(-1) ?? '';
        switch (line.command) {
          case 'CAP': {
            const sub = line.params[1]?.toUpperCase();
            if (sub === 'LS' && !capAnswered) {
              // `CAP <nick> LS * :<caps>` continues; `CAP <nick> LS :<caps>` is the last line.
              const more = line.params.length > 3 && line.params[2] === '*';
              const bytes = Buffer.byteLength(text);
              if (capBytes + bytes > MAX_CAP_LS_BYTES) {
                this.#o.log.warn(
                  { channel: this.#o.channelId, limitBytes: MAX_CAP_LS_BYTES },
                  'IRC CAP LS reply too long; going on with the capabilities gathered',
                );
                return answerCaps();
              }
              capLines++;
              capBytes += bytes;
              for (const c of text.split(' ')) if (c) caps.add(c.split('=')[0]!);
              if (!more) return answerCaps();
              if (capLines >= MAX_CAP_LS_LINES) {
                this.#o.log.warn(
                  { channel: this.#o.channelId, limitLines: MAX_CAP_LS_LINES },
                  'IRC CAP LS reply has too many lines; going on with the capabilities gathered',
                );
                return answerCaps();
              }
            } else if (sub === 'ACK' && sasl) this.write(formatLine('AUTHENTICATE', 'PLAIN'));
            else if (sub === 'NAK') this.write(formatLine('CAP', 'END'));
            return;
          }
          case 'AUTHENTICATE':
            if (line.params[0] === '+') {
              const nick = this.#o.nick;
              this.write(formatLine('AUTHENTICATE', Buffer.from(`${nick}\0${nick}\0${this.#o.password ?? ''}`).toString('base64')));
            }
            return;
          case '903': // RPL_SASLSUCCESS
            this.write(formatLine('CAP', 'END'));
            return;
          case '902': // ERR_NICKLOCKED
          case '904': // ERR_SASLFAIL
          case '905': // ERR_SASLTOOLONG
            return auth(`SASL PLAIN was refused (${line.command} ${text})`);
          case '464': // ERR_PASSWDMISMATCH
            return auth(`the server password was refused (464 ${text})`);
          case '465': // ERR_YOUREBANNEDCREEP
            return this.#end(new ChannelError('CHANNEL_BANNED', `IRC ${host}:${port}: the server bans this client (465 ${text})`));
          case '432': // ERR_ERRONEUSNICKNAME
            return this.#end(new ChannelError('CHANNEL_REQUEST_FAILED', `IRC ${host}:${port}: the server refuses the nick "${this.#nick}" (432 ${text})`));
          case '433': // ERR_NICKNAMEINUSE
          case '436': {
            const next = nicks[nicks.indexOf(this.#nick) + 1];
            if (!next) return this.#end(new ChannelError('CHANNEL_CONFLICT', `IRC ${host}:${port}: "${this.#o.nick}" and its alternates are all in use`));
            this.#o.log.info({ channel: this.#o.channelId, nick: this.#nick, next }, 'IRC nick in use; trying an alternate');
            this.#nick = next;
            this.write(formatLine('NICK', next));
            return;
          }
          case 'ERROR':
            // Refused before registration: a wrong server password is reported this way by some servers.
            if (/passw|access denied|authenticat/i.test(text)) return auth(`the server closed the link: ${text}`);
            return this.#end(new ChannelError('CHANNEL_NETWORK', `IRC ${host}:${port}: ${text}`));
          case '001':
            done();
            if (line.params[0]) this.#nick = line.params[0];
            this.onLine = () => {};
            this.#registered = true;
            this.#reclaimCheck();
            resolve(line);
            return;
          default:
            return;
        }
      };
      socket.once(this.#o.tls ? 'secureConnect' : 'connect', () => {
        this.write(formatLine('CAP', 'LS', '302'));
        if (this.#o.password !== undefined) this.write(formatLine('PASS', this.#o.password));
        this.write(formatLine('NICK', this.#nick));
        this.write(formatLine('USER', this.#o.nick.toLowerCase().slice(0, 10), '0', '*', 'channeld'));
      });
    });
  }

  /** Writes one line (CRLF added); false when the connection is gone. */
  write(line: string): boolean {
    if (!this.open) return false;
    this.#socket!.write(`${line}\r\n`);
    return true;
  }

  /** Says QUIT and closes; `closed` then rejects with CHANNEL_ENDED. */
  close(reason: string): void {
    if (this.open) this.#socket!.end(`${formatLine('QUIT', reason)}\r\n`);
    this.#end(new ChannelError('CHANNEL_ENDED', `IRC connection closed: ${reason}`));
  }

  /** Ends the connection with `err` as the reason; the first reason wins. */
  #end(err: ChannelError): void {
    if (this.#ended) return;
    this.#ended = true;
    clearTimeout(this.#idle);
    clearTimeout(this.#reclaimTimer);
    this.#socket?.destroy();
    this.#fail(err);
  }

  /** Fails the connection from outside (a KICK the adapter will not live with). */
  fail(err: ChannelError): void {
    if (this.open) this.#socket!.end(`${formatLine('QUIT', err.message.slice(0, 200))}\r\n`);
    this.#end(err);
  }

  /**
   * Frames lines with a bound. A line may take at most MAX_INCOMING_LINE_BYTES with its line
   * ending, whether it arrives whole in one chunk or split over many. An overlong line is
   * discarded whole and never parsed, not even a piece of it: its tail, coming in a later chunk,
   * would otherwise read as a line of its own (a server or peer could inject one that way).
   * So only a line still under the bound is buffered, and an overlong one is skipped to its LF.
   */
  #data(chunk: string): void {
    this.#alive();
    let start = 0;
    for (let nl = chunk.indexOf('\n'); nl !== -1; start = nl + 1, nl = chunk.indexOf('\n', start)) {
      if (this.#ended) return;
      const raw = this.#buffer + chunk.slice(start, nl);
      this.#buffer = '';
      if (this.#skipping) {
        this.#skipping = false; // this LF ends the overlong line already reported
        continue;
      }
      // +1: the LF counts toward the limit (a CR, when there is one, is still in `raw`).
      if (Buffer.byteLength(raw) + 1 > MAX_INCOMING_LINE_BYTES) {
        this.#overlong();
        continue;
      }
      this.#line(raw.replace(/\r$/, ''));
    }
    if (this.#skipping || this.#ended) return;
    this.#buffer += chunk.slice(start);
    // Already at the limit without its LF: the line is overlong, so stop holding it.
    if (Buffer.byteLength(this.#buffer) >= MAX_INCOMING_LINE_BYTES) {
      this.#buffer = '';
      this.#skipping = true;
      this.#overlong();
    }
  }

  #overlong(): void {
    this.#o.log.warn(
      { channel: this.#o.channelId, limitBytes: MAX_INCOMING_LINE_BYTES },
      'IRC line longer than allowed (512 bytes plus 8191 of IRCv3 tags); discarded whole',
    );
  }

  #line(raw: string): void {
    const line = parseLine(raw);
    if (!line) return;
    if (line.command === 'PING') {
      this.write(formatLine('PONG', ...(line.params.length ? [line.params.at(-1)!] : [])));
      return;
    }
    if (line.command === 'PONG') return;
    if (this.#registered) this.#watchNicks(line);
    this.onLine(line);
  }

  /** Keeps our nick current, and tries the configured one again when its holder quits or renames. */
  #watchNicks(line: IrcLine): void {
    const from = parseSource(line.prefix);
    const wanted = ircLower(this.#o.nick);
    switch (line.command) {
      case 'NICK':
        if (from && ircLower(from.nick) === ircLower(this.#nick) && line.params[0]) {
          this.#nick = line.params[0];
          this.#reclaimPending = false;
          this.#reclaimCheck();
        } else if (from && ircLower(from.nick) === wanted) this.#reclaim('its holder changed nick');
        return;
      case 'QUIT':
        if (from && ircLower(from.nick) === wanted) this.#reclaim('its holder quit');
        return;
      case '432': // ERR_ERRONEUSNICKNAME
      case '433': // ERR_NICKNAMEINUSE
      case '436': // ERR_NICKCOLLISION
      case '437': // ERR_UNAVAILRESOURCE (a nick held back after a split)
        // Still held: the timer tries again.
        if (line.params[1] && ircLower(line.params[1]) === wanted) this.#reclaimPending = false;
        return;
      default:
        return;
    }
  }

  /** On the configured nick: no more tries. On another: a try every interval until it is ours. */
  #reclaimCheck(): void {
    if (ircLower(this.#nick) !== ircLower(this.#o.nick)) {
      if (!this.#reclaimTimer) this.#schedule();
      return;
    }
    // A timer runs only while we were on another nick: this is a nick regained, not the one we connected with.
    if (this.#reclaimTimer) this.#o.log.info({ channel: this.#o.channelId, nick: this.#nick }, 'IRC regained the configured nick');
    clearTimeout(this.#reclaimTimer);
    this.#reclaimTimer = undefined;
  }

  #schedule(): void {
    clearTimeout(this.#reclaimTimer);
    this.#reclaimTimer = setTimeout(() => {
      this.#reclaimTimer = undefined;
      // No answer in a whole interval: the try is over either way.
      this.#reclaimPending = false;
      this.#reclaim('retrying on the timer');
    }, this.#o.nickReclaimIntervalMs ?? NICK_RECLAIM_INTERVAL_MS);
  }

  /** One try at a time: while one is unanswered, a departure of the holder adds none (the timer ends the wait). */
  #reclaim(why: string): void {
    if (this.#ended || this.#reclaimPending || ircLower(this.#nick) === ircLower(this.#o.nick)) return;
    this.#reclaimPending = true;
    this.#o.log.debug({ channel: this.#o.channelId, nick: this.#nick, wanted: this.#o.nick, why }, 'IRC trying the configured nick again');
    this.write(formatLine('NICK', this.#o.nick));
    // The next timed try is a whole interval after this one.
    this.#schedule();
  }

  /** Any line from the server proves the link; silence gets a PING, and silence after that ends it. */
  #alive(): void {
    clearTimeout(this.#idle);
    this.#pinged = false;
    const tick = () => {
      if (this.#pinged) return this.#end(new ChannelError('CHANNEL_NETWORK', `IRC ${this.#o.host}:${this.#o.port}: no answer to PING; reconnecting`));
      this.#pinged = true;
      this.write(formatLine('PING', 'channeld'));
      this.#idle = setTimeout(tick, IDLE_PING_MS);
    };
    this.#idle = setTimeout(tick, IDLE_PING_MS);
  }
}
