import { randomInt } from 'node:crypto';
import { Api } from 'grammy';
import type { ChannelAdapter, ChannelCapabilities, Deliver, NativeStream, TransportOptions } from '../../src/dispatch/adapter.js';
import type { MessageRef, ReplyTarget } from '../../src/dispatch/message.js';
import { ChannelError } from '../../src/errors.js';
import { sleep } from '../../src/kernel/sleep.js';
import type { HttpRoutes } from '../../src/observe/http.js';
import type { Logger } from '../../src/observe/logger.js';
import { classifyTelegramError, isEntityError, isNotModified } from './errors.js';
import { markdownToTelegramHtml } from './markdown.js';
import { malformedUpdate, normalizeUpdate, type BotIdentity } from './normalize.js';
import { webhookHandler } from './webhook.js';

export interface TelegramOptions {
  id: string;
  apiRoot: string;
  mode: 'polling' | 'webhook';
  nativeDrafts: boolean;
  publicUrl?: string;
  http: HttpRoutes;
  log: Logger;
  /** Long-poll timeout; short in tests. */
  pollTimeoutSeconds?: number;
}

const ALLOWED_UPDATES = ['message', 'channel_post'] as const;

/** grammy types its signals with the abort-controller shim; Node's AbortSignal is what it gets at run time. */
type GrammySignal = Parameters<Api['getMe']>[0];
const sig = (s: AbortSignal | undefined): GrammySignal => s as unknown as GrammySignal;

/** Telegram through grammy's Api client: polling or webhook in, HTML messages and drafts out. */
export class TelegramAdapter implements ChannelAdapter {
  readonly capabilities: ChannelCapabilities;
  readonly #o: TelegramOptions;
  readonly #api: Api;
  readonly #webhookSecret: string | undefined;
  #bot: BotIdentity | undefined;

  constructor(options: TelegramOptions, token: string, webhookSecret?: string) {
    this.#o = options;
    this.#api = new Api(token, { apiRoot: options.apiRoot });
    this.#webhookSecret = webhookSecret;
    this.capabilities = {
      maxMessageLength: 4096,
      editsDrafts: true,
      minEditIntervalMs: 1000, // about one message per second per chat
      nativeStream: options.nativeDrafts ? 'telegram-draft' : 'none',
      typing: true,
      typingRefreshMs: 4500, // a chat action lasts about 5 s
      threads: true,
    };
  }

  get id(): string {
    return this.#o.id;
  }
  get selfId(): string | undefined {
    return this.#bot ? String(this.#bot.id) : undefined;
  }
  get selfName(): string | undefined {
    return this.#bot?.username;
  }

  async #call<T>(method: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw classifyTelegramError(err, method);
    }
  }

  async listen(deliver: Deliver, signal: AbortSignal, onConnected: () => void): Promise<void> {
    const me = await this.#call('getMe', () => this.#api.getMe(sig(signal)));
    this.#bot = { id: me.id, username: me.username };
    if (this.#o.mode === 'webhook') return this.#webhook(deliver, signal, onConnected);
    await this.#call('deleteWebhook', () => this.#api.deleteWebhook({ drop_pending_updates: false }, sig(signal)));
    onConnected();
    await this.#poll(deliver, signal);
  }

  /** Each update is stored before the offset moves past it, so a crash loses nothing. */
  async #poll(deliver: Deliver, signal: AbortSignal): Promise<void> {
    let offset = 0;
    while (!signal.aborted) {
      let updates;
      try {
        updates = await this.#api.getUpdates({ offset, timeout: this.#o.pollTimeoutSeconds ?? 30, limit: 100, allowed_updates: [...ALLOWED_UPDATES] }, sig(signal));
      } catch (err) {
        if (signal.aborted) break;
        const e = classifyTelegramError(err, 'getUpdates');
        if (e.retryAfterMs !== undefined) {
          this.#o.log.warn({ channel: this.#o.id, retryAfterMs: e.retryAfterMs }, 'Telegram asked to slow down polling');
          await sleep(e.retryAfterMs, signal);
          continue;
        }
        throw e;
      }
      // The whole batch is handed over at once (the inbox stores it in one transaction); the
      // offset moves only past the updates stored before the first one that failed.
      const delivered = await Promise.allSettled(
        updates.map((u) => {
          const bad = malformedUpdate(u);
          if (bad) this.#o.log.debug({ channel: this.#o.id, reason: bad }, 'malformed Telegram update skipped');
          const msg = bad ? undefined : normalizeUpdate(u, this.#o.id, this.#bot!);
          return msg ? deliver(msg) : Promise.resolve(false);
        }),
      );
      const failed = delivered.findIndex((d) => d.status === 'rejected');
      const stored = failed < 0 ? updates : updates.slice(0, failed);
      const lastId = stored.map((u) => u?.update_id).findLast((id) => typeof id === 'number');
      if (lastId !== undefined) offset = lastId + 1;
      if (failed >= 0) throw (delivered[failed] as PromiseRejectedResult).reason;
    }
    // Confirm what was handled, so the next start does not receive it again.
    if (offset) await this.#api.getUpdates({ offset, limit: 1, timeout: 0 }, sig(AbortSignal.timeout(2000))).catch(() => {});
  }

  async #webhook(deliver: Deliver, signal: AbortSignal, onConnected: () => void): Promise<void> {
    if (!this.#webhookSecret || !this.#o.publicUrl) throw new ChannelError('CHANNEL_REQUEST_FAILED', 'webhook mode needs public_url and webhook_secret_*', { retryable: false });
    const path = `/webhooks/${this.#o.id}`;
    const remove = this.#o.http.route('POST', path, webhookHandler({ channelId: this.#o.id, secret: this.#webhookSecret, bot: () => this.#bot!, deliver, log: this.#o.log }));
    try {
      const url = new URL(path, this.#o.publicUrl).toString();
      await this.#call('setWebhook', () => this.#api.setWebhook(url, { secret_token: this.#webhookSecret!, allowed_updates: [...ALLOWED_UPDATES] }, sig(signal)));
      onConnected();
      await new Promise<void>((r) => (signal.aborted ? r() : signal.addEventListener('abort', () => r(), { once: true })));
    } finally {
      // The webhook stays set: Telegram keeps queueing updates while we restart.
      remove();
    }
  }

  #threadOf(t: { threadId?: string | undefined }) {
    return t.threadId ? { message_thread_id: Number(t.threadId) } : {};
  }

  /** Sends HTML; if Telegram refuses the entities, the same text goes again as plain text. */
  async send(target: ReplyTarget, text: string, options?: TransportOptions): Promise<MessageRef> {
    const replyTo = target.chatType !== 'dm' && target.replyToMessageId ? Number(target.replyToMessageId.split(':').at(-1)) : undefined;
    const other = {
      ...this.#threadOf(target),
      ...(replyTo ? { reply_parameters: { message_id: replyTo, allow_sending_without_reply: true } } : {}),
      link_preview_options: { is_disabled: true },
    };
    const sent = await this.#call('sendMessage', async () => {
      try {
        return await this.#api.sendMessage(target.chatId, markdownToTelegramHtml(text), { ...other, parse_mode: 'HTML' }, sig(options?.signal));
      } catch (err) {
        if (!isEntityError(err)) throw err;
        return this.#api.sendMessage(target.chatId, text, other, sig(options?.signal));
      }
    });
    return { chatId: target.chatId, messageId: String(sent.message_id), ...(target.threadId ? { threadId: target.threadId } : {}) };
  }

  async edit(ref: MessageRef, text: string, options?: TransportOptions): Promise<void> {
    await this.#call('editMessageText', async () => {
      try {
        await this.#api.editMessageText(ref.chatId, Number(ref.messageId), markdownToTelegramHtml(text), { parse_mode: 'HTML', link_preview_options: { is_disabled: true } }, sig(options?.signal));
      } catch (err) {
        if (isNotModified(err)) return;
        if (!isEntityError(err)) throw err;
        await this.#api.editMessageText(ref.chatId, Number(ref.messageId), text, {}, sig(options?.signal)).catch((e: unknown) => {
          if (!isNotModified(e)) throw e;
        });
      }
    });
  }

  async delete(ref: MessageRef, options?: TransportOptions): Promise<void> {
    await this.#call('deleteMessage', () => this.#api.deleteMessage(ref.chatId, Number(ref.messageId), sig(options?.signal)));
  }

  async typing(target: ReplyTarget, options?: TransportOptions): Promise<void> {
    await this.#call('sendChatAction', () => this.#api.sendChatAction(target.chatId, 'typing', this.#threadOf(target), sig(options?.signal)));
  }

  /** sendMessageDraft in private chats: an animated preview; the final text is a real message. */
  async openNativeStream(target: ReplyTarget): Promise<NativeStream | undefined> {
    if (!this.#o.nativeDrafts || target.chatType !== 'dm') return undefined;
    const draftId = randomInt(1, 2 ** 31 - 1);
    const chatId = Number(target.chatId);
    return {
      update: (text, o) => this.#call('sendMessageDraft', () => this.#api.sendMessageDraft(chatId, draftId, markdownToTelegramHtml(text), { ...this.#threadOf(target), parse_mode: 'HTML' }, sig(o?.signal))).then(() => {}),
      finish: (text, o) => this.send(target, text, o),
    };
  }
}
