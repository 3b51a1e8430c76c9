import type { ChannelAdapter, ChannelCapabilities, Deliver, TransportOptions } from '../../src/contracts/channel.js';
import type { ChannelMessage, MessageRef, ReplyTarget } from '../../src/contracts/message.js';

export interface Call {
  op: 'send' | 'edit' | 'delete' | 'typing';
  chatId: string;
  threadId?: string;
  messageId?: string;
  text?: string;
  at: number;
}

/** A platform in memory: records every transport call and keeps each message's latest text. */
export class RecordingAdapter implements ChannelAdapter {
  readonly calls: Call[] = [];
  readonly texts = new Map<string, string>();
  readonly capabilities: ChannelCapabilities;
  selfId = 'bot-self';
  selfName = 'testbot';
  /** Set by tests that exercise native streaming. */
  openNativeStream?: ChannelAdapter['openNativeStream'];
  /** Injected before a call: throw to simulate the platform refusing. */
  fault: ((call: Call) => void) | undefined;
  /**
   * Injected before a call lands: the platform is slow (or never answers) for as long as the
   * returned promise. The call's abort signal cuts the wait, as a real client's would.
   */
  latency: ((call: Call) => Promise<void>) | undefined;
  #seq = 0;

  constructor(
    readonly id: string,
    caps: Partial<ChannelCapabilities> = {},
  ) {
    this.capabilities = { maxMessageLength: 4000, editsDrafts: true, minEditIntervalMs: 0, nativeStream: false, typing: false, threads: true, ...caps };
  }

  async listen(_deliver: Deliver, signal: AbortSignal, onConnected: () => void): Promise<void> {
    onConnected();
    await new Promise<void>((r) => signal.addEventListener('abort', () => r(), { once: true }));
  }

  /** Like a platform client: an aborted call fails with the signal's reason and never lands. */
  async #record(call: Omit<Call, 'at'>, signal: AbortSignal | undefined): Promise<Call> {
    signal?.throwIfAborted();
    const c = { ...call, at: Date.now() };
    this.fault?.(c);
    if (this.latency) await abortable(this.latency(c), signal);
    c.at = Date.now();
    this.calls.push(c);
    return c;
  }

  async send(target: ReplyTarget, text: string, o?: TransportOptions): Promise<MessageRef> {
    const messageId = `out-${++this.#seq}`;
    await this.#record({ op: 'send', chatId: target.chatId, ...(target.threadId ? { threadId: target.threadId } : {}), messageId, text }, o?.signal);
    this.texts.set(messageId, text);
    return { chatId: target.chatId, messageId, ...(target.threadId ? { threadId: target.threadId } : {}) };
  }
  async edit(ref: MessageRef, text: string, o?: TransportOptions): Promise<void> {
    await this.#record({ op: 'edit', chatId: ref.chatId, messageId: ref.messageId, text, ...(ref.threadId ? { threadId: ref.threadId } : {}) }, o?.signal);
    this.texts.set(ref.messageId, text);
  }
  async delete(ref: MessageRef, o?: TransportOptions): Promise<void> {
    await this.#record({ op: 'delete', chatId: ref.chatId, messageId: ref.messageId }, o?.signal);
    this.texts.delete(ref.messageId);
  }
  async typing(target: ReplyTarget, o?: TransportOptions): Promise<void> {
    await this.#record({ op: 'typing', chatId: target.chatId }, o?.signal);
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
