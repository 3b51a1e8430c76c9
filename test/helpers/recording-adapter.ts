import type { ChannelAdapter, ChannelCapabilities, Deliver, TransportOptions } from '../../src/dispatch/adapter.js';
import type { ChannelMessage, MessageRef, ReplyTarget } from '../../src/dispatch/message.js';

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
  #seq = 0;

  constructor(
    readonly id: string,
    caps: Partial<ChannelCapabilities> = {},
  ) {
    this.capabilities = { maxMessageLength: 4000, editsDrafts: true, minEditIntervalMs: 0, nativeStream: 'none', typing: false, threads: true, ...caps };
  }

  async listen(_deliver: Deliver, signal: AbortSignal, onConnected: () => void): Promise<void> {
    onConnected();
    await new Promise<void>((r) => signal.addEventListener('abort', () => r(), { once: true }));
  }

  #record(call: Omit<Call, 'at'>): Call {
    const c = { ...call, at: Date.now() };
    this.fault?.(c);
    this.calls.push(c);
    return c;
  }

  async send(target: ReplyTarget, text: string, _o?: TransportOptions): Promise<MessageRef> {
    const messageId = `out-${++this.#seq}`;
    this.#record({ op: 'send', chatId: target.chatId, ...(target.threadId ? { threadId: target.threadId } : {}), messageId, text });
    this.texts.set(messageId, text);
    return { chatId: target.chatId, messageId, ...(target.threadId ? { threadId: target.threadId } : {}) };
  }
  async edit(ref: MessageRef, text: string): Promise<void> {
    this.#record({ op: 'edit', chatId: ref.chatId, messageId: ref.messageId, text, ...(ref.threadId ? { threadId: ref.threadId } : {}) });
    this.texts.set(ref.messageId, text);
  }
  async delete(ref: MessageRef): Promise<void> {
    this.#record({ op: 'delete', chatId: ref.chatId, messageId: ref.messageId });
    this.texts.delete(ref.messageId);
  }
  async typing(target: ReplyTarget): Promise<void> {
    this.#record({ op: 'typing', chatId: target.chatId });
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
