import type { ChannelAdapter, ChannelCapabilities, Deliver, NativeStream, SentAt, TransportOptions } from '../../src/contracts/channel.js';
import type { Attachment, ChannelMessage, MessageRef, ReplyTarget } from '../../src/contracts/message.js';
import { checkSize } from '../../src/util/download.js';

/** Every kind of platform call the adapter can make; `draft` is a native stream's update. */
export type Op = 'send' | 'edit' | 'delete' | 'typing' | 'finalize' | 'react' | 'open-stream' | 'draft' | 'download';

export interface Call {
  op: Op;
  chatId: string;
  threadId?: string;
  messageId?: string;
  /** The text sent or edited in; `+👀`/`-👀` for a reaction; the attachment id for a download. */
  text?: string;
  /** When the call landed (after any `latency` or hold). */
  at: number;
  /** When the call started (before any `latency` or hold). */
  startedAt: number;
}

/** Optional parts of the adapter contract, off unless a test asks: their mere presence changes what the core does. */
export interface RecordingOptions {
  /** Adds finalize(): recorded as one `finalize` call per message. */
  finalize?: boolean;
  /** Adds setReaction(): recorded as `react` with text `+emoji` or `-emoji`. */
  reactions?: boolean;
  /** Adds download(): serves these bytes by attachment id, recorded as `download`. */
  files?: Record<string, Buffer>;
  /** Adds openNativeStream(): updates are recorded as `draft`, the end as a `send`. */
  nativeStream?: boolean;
  /** Sends and edits note in the caller's `sentAt` when they started, as a transport that knows when its request went out. */
  stampsSent?: boolean;
}

/** A platform call held in flight until released: the deterministic way to test what happens while one hangs. */
export interface Hold {
  /** Resolves with the first matching call once it is held. */
  readonly reached: Promise<Call>;
  /** Lets the held calls, and every later matching call, through. */
  release(): void;
}

/**
 * A platform in memory: records every transport call and keeps each message's latest text.
 * Every call honours its abort signal as a real client does: an already-aborted signal
 * rejects at once, and an abort while the call is slow (`latency`) or held (`hold`) rejects
 * it promptly with the signal's reason; the call then never lands and is listed in `aborted`.
 */
export class RecordingAdapter implements ChannelAdapter {
  readonly calls: Call[] = [];
  /** Calls cut by their abort signal while in flight; they never landed. */
  readonly aborted: Call[] = [];
  readonly texts = new Map<string, string>();
  /** The bot's reactions on users' messages, by message id. */
  readonly reactions = new Map<string, Set<string>>();
  readonly capabilities: ChannelCapabilities;
  selfId = 'bot-self';
  selfName = 'testbot';
  /** Set by `options.nativeStream`, or by tests that script their own native streaming. */
  openNativeStream?: ChannelAdapter['openNativeStream'];
  finalize?: ChannelAdapter['finalize'];
  setReaction?: ChannelAdapter['setReaction'];
  download?: ChannelAdapter['download'];
  /** Injected before a call: throw to simulate the platform refusing. */
  fault: ((call: Call) => void) | undefined;
  /**
   * Injected before a call lands: the platform is slow (or never answers) for as long as the
   * returned promise. The call's abort signal cuts the wait, as a real client's would.
   */
  latency: ((call: Call) => Promise<void>) | undefined;
  readonly #holds: Array<{ match: (c: Call) => boolean; released: Promise<void>; reach: (c: Call) => void }> = [];
  #seq = 0;
  readonly #stampsSent: boolean;

  constructor(
    readonly id: string,
    caps: Partial<ChannelCapabilities> = {},
    options: RecordingOptions = {},
  ) {
    this.capabilities = { maxMessageLength: 4000, editsDrafts: true, minEditIntervalMs: 0, nativeStream: false, typing: false, ...caps };
    if (options.finalize) this.finalize = (refs, o) => this.#finalize(refs, o);
    if (options.reactions) this.setReaction = (ref, emoji, on, o) => this.#react(ref, emoji, on, o);
    if (options.files) {
      const files = options.files;
      this.download = (att, o) => this.#download(files, att, o);
    }
    if (options.nativeStream) this.openNativeStream = (target, o) => this.#openNativeStream(target, o);
    this.#stampsSent = options.stampsSent === true;
  }

  async listen(_deliver: Deliver, signal: AbortSignal, onConnected: () => void): Promise<void> {
    onConnected();
    await new Promise<void>((r) => signal.addEventListener('abort', () => r(), { once: true }));
  }

  /**
   * Holds every call matching `match` in flight until `release()` (or until its signal
   * aborts). Await `reached` to know one is hanging, instead of sleeping.
   */
  hold(match: (c: Call) => boolean): Hold {
    let release!: () => void;
    let reach!: (c: Call) => void;
    const released = new Promise<void>((r) => (release = r));
    const reached = new Promise<Call>((r) => (reach = r));
    this.#holds.push({ match, released, reach });
    return { reached, release };
  }

  /** Like a platform client: an aborted call fails with the signal's reason and never lands. */
  async #record(call: Omit<Call, 'at' | 'startedAt'>, signal: AbortSignal | undefined, sentAt?: SentAt): Promise<Call> {
    signal?.throwIfAborted();
    const startedAt = Date.now();
    const c = { ...call, at: startedAt, startedAt };
    if (sentAt && this.#stampsSent) sentAt.atMs = c.startedAt;
    this.fault?.(c);
    const waits = this.#holds.filter((h) => h.match(c)).map((h) => (h.reach(c), h.released));
    if (this.latency) waits.push(this.latency(c));
    if (waits.length) {
      try {
        await abortable(Promise.all(waits), signal);
      } catch (err) {
        if (signal?.aborted) this.aborted.push(c);
        throw err;
      }
    }
    c.at = Date.now();
    this.calls.push(c);
    return c;
  }

  async send(target: ReplyTarget, text: string, o?: TransportOptions): Promise<MessageRef> {
    const messageId = `out-${++this.#seq}`;
    await this.#record({ op: 'send', chatId: target.chatId, ...(target.threadId ? { threadId: target.threadId } : {}), messageId, text }, o?.signal, o?.sentAt);
    this.texts.set(messageId, text);
    return { chatId: target.chatId, messageId, ...(target.threadId ? { threadId: target.threadId } : {}) };
  }
  async edit(ref: MessageRef, text: string, o?: TransportOptions): Promise<void> {
    await this.#record(
      { op: 'edit', chatId: ref.chatId, messageId: ref.messageId, text, ...(ref.threadId ? { threadId: ref.threadId } : {}) },
      o?.signal,
      o?.sentAt,
    );
    this.texts.set(ref.messageId, text);
  }
  async delete(ref: MessageRef, o?: TransportOptions): Promise<void> {
    await this.#record({ op: 'delete', chatId: ref.chatId, messageId: ref.messageId }, o?.signal);
    this.texts.delete(ref.messageId);
  }
  async typing(target: ReplyTarget, o?: TransportOptions): Promise<void> {
    await this.#record({ op: 'typing', chatId: target.chatId }, o?.signal);
  }

  async #finalize(refs: readonly MessageRef[], o?: TransportOptions): Promise<void> {
    for (const ref of refs) await this.#record({ op: 'finalize', chatId: ref.chatId, messageId: ref.messageId }, o?.signal);
  }

  async #react(ref: MessageRef, emoji: string, on: boolean, o?: TransportOptions): Promise<void> {
    await this.#record({ op: 'react', chatId: ref.chatId, messageId: ref.messageId, text: `${on ? '+' : '-'}${emoji}` }, o?.signal);
    const set = this.reactions.get(ref.messageId) ?? new Set<string>();
    if (on) set.add(emoji);
    else set.delete(emoji);
    this.reactions.set(ref.messageId, set);
  }

  async #download(files: Record<string, Buffer>, att: Attachment, o: { maxBytes: number; signal: AbortSignal }): Promise<Buffer> {
    const name = att.name ?? att.id;
    checkSize(name, att.size, o.maxBytes);
    await this.#record({ op: 'download', chatId: '', text: att.id }, o.signal);
    const bytes = files[att.id];
    if (!bytes) throw new Error(`no file "${att.id}" on this platform`);
    // Where the platform did not say the size, the limit applies to the bytes themselves.
    checkSize(name, bytes.length, o.maxBytes);
    return bytes;
  }

  async #openNativeStream(target: ReplyTarget, o?: TransportOptions): Promise<NativeStream> {
    const where = { chatId: target.chatId, ...(target.threadId ? { threadId: target.threadId } : {}) };
    await this.#record({ op: 'open-stream', ...where }, o?.signal);
    return {
      update: async (text, uo) => void (await this.#record({ op: 'draft', ...where, text }, uo?.signal)),
      finish: (text, fo) => this.send(target, text, fo),
    };
  }

  /** Latest texts of messages sent into a chat (and thread), in send order. */
  visible(chatId: string, threadId?: string): string[] {
    return this.calls
      .filter((c) => c.op === 'send' && c.chatId === chatId && c.threadId === threadId && this.texts.has(c.messageId!))
      .map((c) => this.texts.get(c.messageId!)!);
  }
}

let n = 0;
/** A user message on channel `channelId`. */
export function userMessage(channelId: string, text: string, over: Partial<ChannelMessage> = {}): ChannelMessage {
  return {
    channelId,
    kind: 'telegram',
    messageId: `in-${++n}`,
    chat: { id: 'chat-1', type: 'dm' },
    sender: { id: 'user-1', name: 'Ada', isBot: false },
    text,
    attachments: [],
    addressed: true,
    receivedAt: Date.now(),
    ...over,
  };
}

/** `p`, or a rejection with the signal's reason as soon as it aborts. */
function abortable<T>(p: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return p;
  signal.throwIfAborted();
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
