import { randomUUID } from 'node:crypto';
import { client, type Element, xml, type XmppClient } from '@xmpp/client';
import type { Logger } from 'pino';
import type { ChannelAdapter, ChannelCapabilities, Deliver, NativeStream, TransportOptions } from '../../src/contracts/channel.js';
import { ChannelError } from '../../src/contracts/errors.js';
import type { MessageRef, ReplyTarget } from '../../src/contracts/message.js';
import { settleWithin, untilAborted } from '../../src/util/abortable.js';
import { platformCaller } from '../../src/util/platform-call.js';
import { guardConnection } from './connection.js';
import { classifyXmppError } from './errors.js';
import { NS_CHATSTATES, NS_CORRECT, normalizeMessage } from './normalize.js';
import { leftNotes, Rooms, type RoomsMemory } from './rooms.js';

export interface XmppOptions {
  id: string;
  local: string;
  domain: string;
  password: string;
  service: string;
  rooms: ReadonlyArray<{ jid: string; nick: string }>;
  connectTimeoutMs: number;
  log: Logger;
}

const NS_SM = 'urn:xmpp:sm:3';
/** How long "online" waits for stream management to be enabled before it goes ahead anyway. */
const SM_WAIT_MS = 5000;
const NS_DISCO_INFO = 'http://jabber.org/protocol/disco#info';
/** How long a client gets to say whether it understands corrections; no answer is no. */
const DISCO_TIMEOUT_MS = 5000;
/** Bounds of what is remembered per peer (JIDs come from the network). */
const MAX_REMEMBERED = 2000;
/** The longest message; a longer answer goes as several. */
const MAX_MESSAGE_CHARS = 16_000;

/** A Map that forgets its oldest entries past `max`. */
class Bounded<K, V> extends Map<K, V> {
  constructor(private readonly max: number) {
    super();
  }
  override set(key: K, value: V): this {
    this.delete(key);
    super.set(key, value);
    for (const k of this.keys()) {
      if (this.size <= this.max) break;
      this.delete(k);
    }
    return this;
  }
}

/**
 * XMPP through @xmpp/client: SASL, resource binding, stream management (XEP-0198:
 * resumption when the server offers it) and reconnects with a backoff that doubles.
 * One-to-one chats are answered with live drafts as Last Message Corrections (XEP-0308)
 * where the person's client says it supports them (disco#info), final text otherwise and
 * in rooms; typing is a chat state (XEP-0085).
 */
export class XmppAdapter implements ChannelAdapter {
  readonly capabilities: ChannelCapabilities = {
    maxMessageLength: MAX_MESSAGE_CHARS,
    editsDrafts: true,
    minEditIntervalMs: 1000,
    nativeStream: true,
    typing: true,
    typingRefreshMs: 20_000,
  };
  readonly #o: XmppOptions;
  readonly #call = platformCaller(classifyXmppError);
  #xmpp: XmppClient | undefined;
  /** The rooms of the current run of the listener. */
  #rooms: Rooms | undefined;
  /** The rooms left for good and those ever joined: kept across runs of the listener (see rooms.ts). */
  readonly #roomsMemory: RoomsMemory = { left: new Map(), joinedOnce: new Set() };
  /** Room occupant (room@service/nick) → real bare JID, where the room shows it. */
  readonly #occupants = new Bounded<string, string>(MAX_REMEMBERED);
  /** A person's bare JID → the full JID they last wrote from (whose client is asked about corrections). */
  readonly #lastFrom = new Bounded<string, string>(MAX_REMEMBERED);
  /** A full JID → whether its client announced Last Message Correction. */
  readonly #corrects = new Bounded<string, Promise<boolean>>(MAX_REMEMBERED);

  constructor(options: XmppOptions) {
    this.#o = options;
  }

  get id(): string {
    return this.#o.id;
  }
  get selfId(): string | undefined {
    return `${this.#o.local}@${this.#o.domain}`.toLowerCase();
  }
  get selfName(): string | undefined {
    return this.#o.local;
  }

  async listen(deliver: Deliver, signal: AbortSignal, onConnected: () => void, onReconnecting?: (reason: string) => void): Promise<void> {
    const x = client({
      service: this.#o.service,
      domain: this.#o.domain,
      username: this.#o.local,
      password: this.#o.password,
      resource: `channeld-${randomUUID().slice(0, 8)}`,
    });
    let fail!: (err: ChannelError) => void;
    const fatal = new Promise<never>((_, reject) => (fail = reject));
    fatal.catch(() => {});
    const baseDelayMs = x.reconnect.delay;
    // Bounds on each stream, and a stream the parser gave up on (or the server closed) ends
    // the connection without the daemon; see connection.ts.
    const guard = guardConnection(x, this.#o.log, this.#o.id);
    x.on('error', (err: unknown) => {
      const e = classifyXmppError(err, 'stream');
      this.#o.log.warn({ channel: this.#o.id, err: e.message }, 'XMPP error');
      // A login refused on a reconnect leaves that stream open with nothing more to come (no
      // reconnect follows): the listener ends, and where the refusal is temporary the
      // supervisor logs in again after its backoff.
      if (!e.retryable || (err as { name?: string } | undefined)?.name === 'SASLError') fail(e);
    });
    // Whether the stream takes stanzas (see below): from the end of that wait on a new session,
    // or from <resumed/>, until the connection is lost. Rooms are rejoined only then.
    let ready = false;
    x.on('disconnect', () => (ready = false));
    x.streamManagement.on('resumed', () => (ready = true));
    const rooms = new Rooms({
      channel: this.#o.id,
      rooms: this.#o.rooms,
      log: this.#o.log,
      memory: this.#roomsMemory,
      occupants: this.#occupants,
      send: (el) => x.send(el),
      online: () => ready && x.status === 'online',
      fail: (err) => fail(err),
      signal,
    });
    this.#rooms = rooms;
    x.reconnect.on('reconnecting', () => {
      onReconnecting?.(guard.takeReason() ?? 'XMPP connection lost; reconnecting (the session resumes where the server offers XEP-0198)');
      // Backoff: each failed attempt waits twice as long, up to a minute.
      x.reconnect.delay = Math.min(60_000, x.reconnect.delay * 2);
    });
    // @xmpp/client announces "online" at resource binding, before it enables stream
    // management: a stanza sent then makes its count of handled stanzas disagree with the
    // server's (Prosody closes the stream). So nothing is sent until <enabled/> or <failed/>
    // where the server offered XEP-0198.
    let smOffered = false;
    let smSettled: () => void = () => {};
    x.on('element', (el: Element) => {
      if (el.name === 'stream:features') smOffered = el.getChild('sm', NS_SM) !== undefined;
      if (el.is('enabled', NS_SM) || el.is('failed', NS_SM) || el.is('resumed', NS_SM)) setImmediate(() => smSettled());
    });
    x.on('online', () => {
      x.reconnect.delay = baseDelayMs;
      const settled = smOffered && !x.streamManagement.enabled ? new Promise<void>((r) => (smSettled = r)) : Promise.resolve();
      void settleWithin(settled, SM_WAIT_MS, signal)
        .then(() => {
          ready = true;
          return this.#online(x, rooms);
        })
        .then(onConnected, (err: unknown) => fail(classifyXmppError(err, 'join')));
    });
    x.on('stanza', (st: Element) => this.#stanza(st, rooms, deliver));
    x.iqCallee.get(NS_DISCO_INFO, 'query', () =>
      xml(
        'query',
        { xmlns: NS_DISCO_INFO },
        xml('identity', { category: 'client', type: 'bot', name: 'channeld' }),
        xml('feature', { var: NS_CORRECT }),
        xml('feature', { var: NS_CHATSTATES }),
      ),
    );
    this.#xmpp = x;
    try {
      const started = x.start().catch((err: unknown) => Promise.reject(classifyXmppError(err, 'login')));
      const timeout = new Promise<never>((_, reject) => {
        const t = setTimeout(
          () => reject(new ChannelError('CHANNEL_CONNECT_TIMEOUT', `XMPP: not online within ${this.#o.connectTimeoutMs} ms`)),
          this.#o.connectTimeoutMs,
        );
        void started.finally(() => clearTimeout(t)).catch(() => {});
        signal.addEventListener('abort', () => clearTimeout(t), { once: true });
      });
      await Promise.race([started, fatal, timeout, untilAborted(signal)]);
      if (signal.aborted) return;
      await Promise.race([fatal, untilAborted(signal)]);
    } finally {
      this.#xmpp = undefined;
      this.#rooms = undefined;
      rooms.close();
      x.reconnect.stop();
      x.removeAllListeners('online');
      const socket = x.socket;
      await settleWithin(
        x.stop().catch(() => {}),
        2000,
      );
      // A server that never answered our close: its socket is not left open. Then nothing of
      // ours listens any more, but a late error the library re-emits still finds a listener
      // (an "error" event with none ends the process).
      socket?.destroy();
      x.socket?.destroy();
      x.removeAllListeners();
      x.on('error', () => {});
    }
  }

  /** Available for one-to-one chats, then into each room (see rooms.ts). */
  async #online(x: XmppClient, rooms: Rooms): Promise<void> {
    await x.send(xml('presence'));
    await rooms.joinAll();
  }

  /** For /status: the rooms the bot is out of (removed, refused), and why. */
  notes(): string[] {
    return this.#rooms?.notes() ?? leftNotes(this.#roomsMemory);
  }

  #stanza(st: Element, rooms: Rooms, deliver: Deliver): void {
    if (st.is('presence')) {
      rooms.presence(st);
      return;
    }
    if (!st.is('message')) return;
    const msg = normalizeMessage(st, { channelId: this.#o.id, self: this.selfId!, rooms: rooms.joined, realJid: (o) => this.#occupants.get(o) });
    if (!msg) return;
    if (msg.chat.type === 'dm' && st.attrs.from) this.#lastFrom.set(msg.chat.id, st.attrs.from);
    // Acknowledged (XEP-0198) as it arrives, as @xmpp/client does; stored just after.
    deliver(msg).catch((err: unknown) => this.#o.log.warn({ err, channel: this.#o.id }, 'XMPP message not stored'));
  }

  #client(): XmppClient {
    if (this.#xmpp?.status !== 'online') throw new ChannelError('CHANNEL_NETWORK', 'XMPP: not connected; the message goes once the connection is back');
    return this.#xmpp;
  }

  #type(chatId: string): 'groupchat' | 'chat' {
    return this.#o.rooms.some((r) => r.jid === chatId) ? 'groupchat' : 'chat';
  }

  async send(target: ReplyTarget, text: string, options: TransportOptions): Promise<MessageRef> {
    const id = randomUUID();
    const type = this.#type(target.chatId);
    await this.#call('send', options.signal, () =>
      this.#client().send(
        xml('message', { type, to: target.chatId, id }, xml('body', {}, text), type === 'chat' ? xml('active', { xmlns: NS_CHATSTATES }) : undefined),
      ),
    );
    return { chatId: target.chatId, messageId: id };
  }

  /**
   * A Last Message Correction of `ref` (XEP-0308: `replace` names the first message's id).
   * Sent where the person's client understands corrections. Elsewhere a draft was never
   * sent (see openNativeStream); only the last part of an answer longer than one message
   * can have been, and its final text then follows as a message of its own.
   */
  async edit(ref: MessageRef, text: string, options: TransportOptions): Promise<void> {
    const type = this.#type(ref.chatId);
    // A message to edit whose client we know nothing of was sent by an earlier run (a turn
    // restarted after a crash): drafts go only to clients that announced corrections, so it had.
    const corrects = type === 'chat' && (!this.#lastFrom.has(ref.chatId) || (await this.#correctsFor(ref.chatId)));
    if (!corrects) {
      if (options.final) await this.send({ channelId: this.#o.id, chatId: ref.chatId, chatType: 'dm' }, text, options);
      return;
    }
    await this.#call('correct', options.signal, () =>
      this.#client().send(
        xml('message', { type, to: ref.chatId, id: randomUUID() }, xml('body', {}, text), xml('replace', { xmlns: NS_CORRECT, id: ref.messageId })),
      ),
    );
  }

  /** XMPP has no deletion every client shows; the message stays. */
  async delete(_ref: MessageRef, _options: TransportOptions): Promise<void> {}

  /** "composing" (XEP-0085) in one-to-one chats. */
  async typing(target: ReplyTarget, options: TransportOptions): Promise<void> {
    if (this.#type(target.chatId) !== 'chat') return;
    await this.#call('typing', options.signal, () =>
      this.#client().send(xml('message', { type: 'chat', to: target.chatId }, xml('composing', { xmlns: NS_CHATSTATES }))),
    );
  }

  /**
   * Where the person's client understands corrections there is no native stream: the
   * reply is a message corrected as the model writes (send + edit). Everywhere else
   * (rooms, clients without XEP-0308) the "stream" shows nothing until the end and then
   * sends the final text once.
   */
  async openNativeStream(target: ReplyTarget): Promise<NativeStream | undefined> {
    if (this.#type(target.chatId) === 'chat' && (await this.#correctsFor(target.chatId))) return undefined;
    return { finish: (text, o) => this.send(target, text, o), finishSendsMessage: true };
  }

  /** Asks the client the person last wrote from (disco#info) whether it supports corrections; remembered per full JID. */
  #correctsFor(bare: string): Promise<boolean> {
    const full = this.#lastFrom.get(bare);
    const x = this.#xmpp;
    if (!full || !x) return Promise.resolve(false);
    let known = this.#corrects.get(full);
    if (!known) {
      known = x.iqCaller
        .request(xml('iq', { type: 'get', to: full }, xml('query', { xmlns: NS_DISCO_INFO })), DISCO_TIMEOUT_MS)
        .then((res) => (res.getChild('query', NS_DISCO_INFO)?.getChildren('feature') ?? []).some((f) => f.attrs.var === NS_CORRECT))
        .catch(() => false);
      this.#corrects.set(full, known);
    }
    return known;
  }
}
