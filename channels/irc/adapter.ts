import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { ChannelAdapter, ChannelCapabilities, Deliver, TransportOptions } from '../../src/contracts/channel.js';
import { ChannelError } from '../../src/contracts/errors.js';
import type { MessageRef, ReplyTarget } from '../../src/contracts/message.js';
import { untilAborted } from '../../src/util/abortable.js';
import { TokenBucket } from './bucket.js';
import { IrcConnection } from './connection.js';
import { DropNotices } from './drop-notice.js';
import { normalizePrivmsg, senderAllowed } from './normalize.js';
import { formatLine, type IrcLine, ircLower, parseSource } from './protocol.js';
import { ircLines } from './text.js';

export interface IrcOptions {
  id: string;
  host: string;
  port: number;
  tls: boolean;
  nick: string;
  password: string | undefined;
  channels: readonly string[];
  /** `allow_from` as masks; a sender's id is the mask it matched (see normalize.ts). */
  allowFrom: readonly string[];
  floodBurst: number;
  floodIntervalMs: number;
  connectTimeoutMs: number;
  log: Logger;
  /** Tests shorten how often the configured nick is tried again (IrcConnection's NICK_RECLAIM_INTERVAL_MS). */
  nickReclaimIntervalMs?: number;
}

/**
 * A chunk ReplyStream planned through `capabilities.split` is already one plain IRC line;
 * it starts with NUL (which no IRC line can hold) so `send` does not read it as Markdown a
 * second time. Text sent without the stream (approval questions, notices) has no marker.
 */
const PLAIN = '\u0000';

/** The most messages waiting to be stored, so a flood cannot queue without bound. */
const MAX_PENDING_DELIVERIES = 1000;
/** The longest user@host replies are planned for (USERLEN 10, HOSTLEN 63); `send` measures with the real one once known. */
const UNKNOWN_USER = 'x'.repeat(10);
const UNKNOWN_HOST = 'x'.repeat(63);
/** Assumed for a target not yet seen: RFC 2812's and common servers' upper bounds. */
const MAX_TARGET = 50;

/** Messages received and not yet stored, for one connection. */
interface Pending {
  count: number;
  /** Each message is stored after the one before it. */
  chain: Promise<void>;
  /** Aborts when the connection's listening ends. */
  signal: AbortSignal;
}

/**
 * IRC: final text only (IRC cannot edit), one PRIVMSG per line, lines wrapped to fit 512 bytes
 * with the prefix the server adds, paced by a token bucket. IRC has no redelivery and no
 * acknowledgement: a message is stored before the next one is read from our queue, and what
 * reached our socket but not the inbox when the process died is lost (docs/PLATFORMS.md, IRC).
 */
export class IrcAdapter implements ChannelAdapter {
  readonly capabilities: ChannelCapabilities;
  readonly #o: IrcOptions;
  readonly #bucket: TokenBucket;
  readonly #dropNotices: DropNotices;
  #conn: IrcConnection | undefined;
  /** Our user@host as the server shows it to others (from our own JOIN). */
  #userHost = { user: UNKNOWN_USER, host: UNKNOWN_HOST };

  constructor(options: IrcOptions) {
    this.#o = options;
    this.#bucket = new TokenBucket(options.floodBurst, options.floodIntervalMs);
    this.#dropNotices = new DropNotices(this.#bucket, options.log, options.id);
    // Planned from the config alone, so a restarted turn splits its text where the first run
    // did (the lines already sent are known by their index): the longest nick we may get (an
    // alternate), the longest user@host and the longest target we may answer.
    const longestTarget = Math.min(MAX_TARGET, Math.max(30, ...options.channels.map((c) => Buffer.byteLength(c))));
    const planned = 510 - Buffer.byteLength(`:${options.nick}__!${UNKNOWN_USER}@${UNKNOWN_HOST} PRIVMSG `) - longestTarget - 2;
    this.capabilities = {
      maxMessageLength: planned,
      // Each planned message is one line.
      split: (text) => ircLines(text, planned).map((l) => PLAIN + l),
      editsDrafts: false,
      minEditIntervalMs: options.floodIntervalMs,
      nativeStream: false,
      typing: false,
    };
  }

  get id(): string {
    return this.#o.id;
  }
  get selfId(): string | undefined {
    return this.#conn ? `${this.#conn.nick}!${this.#userHost.user}@${this.#userHost.host}` : undefined;
  }
  get selfName(): string | undefined {
    return this.#conn?.nick;
  }

  /**
   * The bytes of text one PRIVMSG to a target of `targetBytes` may carry: 512 less CRLF and
   * what the server puts before the text when it relays the line (`:nick!user@host PRIVMSG target :`).
   */
  #budget(targetBytes: number): number {
    const nick = this.#conn?.nick ?? this.#o.nick;
    const prefix = `:${nick}!${this.#userHost.user}@${this.#userHost.host} PRIVMSG `;
    return 510 - Buffer.byteLength(prefix) - targetBytes - 2;
  }

  async listen(deliver: Deliver, signal: AbortSignal, onConnected: () => void): Promise<void> {
    const conn = new IrcConnection({ ...this.#o, channelId: this.#o.id });
    this.#userHost = { user: UNKNOWN_USER, host: UNKNOWN_HOST };
    // Ends this connection's waits (a notice waiting for the send bucket) when listening ends.
    const ended = new AbortController();
    try {
      const welcome = await conn.register(signal);
      this.#conn = conn;
      // Our user@host as others see it: in the welcome where the server says it, and from USERHOST (RFC 2812) in any case.
      const mask = parseSource((welcome.params.at(-1) ?? '').split(' ').at(-1));
      if (mask && ircLower(mask.nick) === ircLower(conn.nick)) this.#userHost = { user: mask.user, host: mask.host };
      conn.write(formatLine('USERHOST', conn.nick));
      const pending: Pending = { count: 0, chain: Promise.resolve(), signal: ended.signal };
      conn.onLine = (line) => this.#line(conn, line, deliver, pending);
      if (this.#o.channels.length) conn.write(formatLine('JOIN', this.#o.channels.join(',')));
      onConnected();
      await Promise.race([conn.closed, untilAborted(signal)]);
    } finally {
      ended.abort();
      if (this.#conn === conn) this.#conn = undefined;
      conn.close('channeld stopping');
    }
  }

  #line(conn: IrcConnection, line: IrcLine, deliver: Deliver, pending: Pending): void {
    const me = ircLower(conn.nick);
    const from = parseSource(line.prefix);
    const text = line.params.at(-1) ?? '';
    switch (line.command) {
      case 'PRIVMSG': {
        if (!from || line.params.length < 2) return;
        // Addressed by the nick we hold now, not the configured one: while that is held by someone
        // else (another user, another bot, or our ghost until the connection takes it back),
        // "nick: ..." names its holder, and answering it would speak for them.
        const msg = normalizePrivmsg({ channelId: this.#o.id, from, target: line.params[0]!, text, selfNick: conn.nick, allowFrom: this.#o.allowFrom });
        if (!msg) return;
        if (pending.count >= MAX_PENDING_DELIVERIES) {
          // IRC never delivers it again: someone who asked the bot must hear it is gone, or their question vanishes in silence.
          // Not a stranger, though: the core would refuse them anyway, and their notices would take the send bucket from answers.
          const notice = !msg.addressed
            ? 'not addressed to the bot'
            : !senderAllowed(msg.sender.id, this.#o.allowFrom)
              ? 'sender not on allow_from'
              : this.#dropNotices.tell(from.nick, pending.signal, (l) => conn.write(l));
          this.#o.log.warn({ channel: this.#o.id, from: from.nick, notice }, 'IRC message dropped: too many waiting to be stored');
          return;
        }
        pending.count++;
        // In the order received, one at a time; PING and the rest of the stream do not wait.
        pending.chain = pending.chain
          .then(() => deliver(msg))
          .then(
            () => {},
            (err: unknown) => this.#o.log.warn({ err, channel: this.#o.id }, 'IRC message not stored'),
          )
          .finally(() => pending.count--);
        return;
      }
      case 'JOIN':
        if (from && ircLower(from.nick) === me) {
          this.#userHost = { user: from.user, host: from.host };
          this.#o.log.info({ channel: this.#o.id, room: line.params[0] }, 'IRC channel joined');
        }
        return;
      case '302': {
        // RPL_USERHOST: "nick[*]=+user@host"
        const m = /^([^=*\s]+)\*?=[+-]([^@\s]+)@(\S+)/.exec(text);
        if (m && ircLower(m[1]!) === me) this.#userHost = { user: m[2]!, host: m[3]! };
        return;
      }
      case '396': // RPL_HOSTHIDDEN: a cloak replaced our host
        if (line.params[1]) this.#userHost = { ...this.#userHost, host: line.params[1].replace(/^.*@/, '') };
        return;
      case 'KICK':
        if (line.params[1] && ircLower(line.params[1]) === me)
          conn.fail(
            new ChannelError(
              'CHANNEL_KICKED',
              `IRC: ${from?.nick ?? line.prefix ?? 'the server'} kicked the bot from ${line.params[0]} (${line.params[2] ?? 'no reason'}); not rejoining`,
            ),
          );
        return;
      case '474': // ERR_BANNEDFROMCHAN
        conn.fail(new ChannelError('CHANNEL_BANNED', `IRC: the bot is banned from ${line.params[1]} (474 ${text})`));
        return;
      case '471': // ERR_CHANNELISFULL
      case '473': // ERR_INVITEONLYCHAN
      case '475': // ERR_BADCHANNELKEY
      case '477': // ERR_NEEDREGGEDNICK
        conn.fail(new ChannelError('CHANNEL_FORBIDDEN', `IRC: cannot join ${line.params[1]} (${line.command} ${text})`));
        return;
      case 'ERROR':
        conn.fail(new ChannelError('CHANNEL_NETWORK', `IRC: the server closed the link: ${text}`));
        return;
      default:
        return;
    }
  }

  /** One PRIVMSG per line, each waiting for the token bucket; a line that was planned too long for this target is wrapped again. */
  async send(target: ReplyTarget, text: string, options: TransportOptions): Promise<MessageRef> {
    const budget = this.#budget(Buffer.byteLength(target.chatId));
    const lines = text.startsWith(PLAIN) ? ircLines(`\`\`\`\n${text.slice(1)}\n\`\`\``, budget) : ircLines(text, budget);
    for (const line of lines) {
      await this.#bucket.take(options.signal);
      const conn = this.#conn;
      if (!conn?.open) throw new ChannelError('CHANNEL_NETWORK', 'IRC: not connected; the line goes once the connection is back');
      conn.write(formatLine('PRIVMSG', target.chatId, line));
    }
    return { chatId: target.chatId, messageId: randomUUID() };
  }

  /**
   * IRC cannot edit: a line once sent stays. ReplyStream edits only lines a re-run after a
   * restart finds already sent (their refs were stored), and those keep what they showed.
   */
  async edit(_ref: MessageRef, _text: string, _options: TransportOptions): Promise<void> {}

  /** IRC cannot delete either; the line stays. */
  async delete(_ref: MessageRef, _options: TransportOptions): Promise<void> {}

  /** No typing indicator on plain IRC (capabilities.typing is false, so this is not called). */
  async typing(_target: ReplyTarget, _options: TransportOptions): Promise<void> {}
}
