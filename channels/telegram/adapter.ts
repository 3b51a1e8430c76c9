import { randomInt } from 'node:crypto';
import { Api, InputFile } from 'grammy';
import type { ReactionTypeEmoji } from 'grammy/types';
import type { ChannelAdapter, ChannelCapabilities, Deliver, NativeStream, OutgoingFile, TransportOptions } from '../../src/contracts/channel.js';
import { checkSize, fetchLimited } from '../../src/util/download.js';
import type { Attachment, MessageRef, ReplyTarget } from '../../src/contracts/message.js';
import { ChannelError, CodedError, errorMessage } from '../../src/contracts/errors.js';
import { sleep, untilAborted } from '../../src/util/abortable.js';
import { DEFAULT_REQUEST_TIMEOUT_MS, platformCaller } from '../../src/util/platform-call.js';
import { notingSent } from '../../src/util/dispatch-answer.js';
import type { HttpRoutes } from '../../src/contracts/http.js';
import type { Logger } from 'pino';
import { chunkText } from '../../src/util/chunk.js';
import { classifyTelegramError, isEntityError, isNotModified, isRichUnsupported } from './errors.js';
import { forTelegramHtml, markdownToTelegramHtml } from './markdown.js';
import { chunkRich, RICH_MAX_CHARS, TEXT_MAX_CHARS, toRichMarkdown } from './rich.js';
import { callbackQueryId, malformedUpdate, normalizeUpdate, type BotIdentity } from './normalize.js';
import { NEWER_METHOD_STRIKES, RichFallback } from './rich-fallback.js';
import { HotBotApi } from './hot-api.js';
import { webhookHandler } from './webhook.js';

export interface TelegramOptions {
  id: string;
  apiRoot: string;
  mode: 'polling' | 'webhook';
  nativeDrafts: boolean;
  /** Rich messages (sendRichMessage, Markdown rendered by Telegram) where the server accepts them. */
  richMessages: boolean;
  publicUrl?: string;
  http: HttpRoutes;
  log: Logger;
  /** Long-poll timeout; short in tests. */
  pollTimeoutSeconds?: number;
}

const ALLOWED_UPDATES = ['message', 'channel_post', 'callback_query'] as const;
/** The long poll's `timeout` when the options give none. */
const POLL_TIMEOUT_S = 30;
/**
 * How much longer than its long-poll timeout a getUpdates may take before it is cut: the
 * server answers at that timeout, so only a hung server or link is later than this.
 */
export const POLL_MARGIN_S = 15;

/** grammy types its signals with the abort-controller shim; Node's AbortSignal is what it gets at run time. */
type GrammySignal = Parameters<Api['getMe']>[0];
const sig = (s: AbortSignal): GrammySignal => s as unknown as GrammySignal;

/** Telegram through grammy's Api client: polling or webhook in, HTML messages and drafts out. */
export class TelegramAdapter implements ChannelAdapter {
  readonly capabilities: ChannelCapabilities;
  readonly #o: TelegramOptions;
  readonly #api: Api;
  /**
   * The calls made per message (sends, edits, drafts, typing, reactions) over one keep-alive
   * undici pool, with grammy's signatures and error classes (hot-api.ts): node-fetch's
   * per-call Request and stream, and grammy's per-call timer and races, cost about as much
   * client CPU as the rest of a message. The adapter made it, so `close` releases it.
   */
  readonly #hot: HotBotApi;
  readonly #webhookSecret: string | undefined;
  readonly #token: string;
  #bot: BotIdentity | undefined;
  /** Rich messages until the server refuses them, or fails them while HTML works; then HTML for good. */
  readonly #rich: RichFallback;
  /** Native drafts (sendMessageDraft) until the server fails them NEWER_METHOD_STRIKES times in a row. */
  #drafts: boolean;
  #draftStrikes = 0;
  /** Each Bot API call: cut by its signal or the request timeout, failures sorted by classifyTelegramError. */
  readonly #call = platformCaller(classifyTelegramError);
  /** The same for the calls a reply makes on HotBotApi, whose requests settle the moment their signal aborts. */
  readonly #hotCall = platformCaller(classifyTelegramError, DEFAULT_REQUEST_TIMEOUT_MS, { settlesOnAbort: true });

  constructor(options: TelegramOptions, token: string, webhookSecret?: string) {
    this.#o = options;
    this.#api = new Api(token, { apiRoot: options.apiRoot });
    this.#hot = new HotBotApi(token, options.apiRoot);
    this.#token = token;
    this.#webhookSecret = webhookSecret;
    this.#rich = new RichFallback(options.richMessages, options.id, options.log);
    this.#drafts = options.nativeDrafts;
    const rich = () => this.#rich.on;
    this.capabilities = {
      // Read on every plan: a refusal mid-reply re-plans the reply at the HTML limit.
      get maxMessageLength() {
        return rich() ? RICH_MAX_CHARS : TEXT_MAX_CHARS;
      },
      // On HTML the split is on the text as rendered (a table grows by its padding), so each piece fits.
      split: (text) => (this.#rich.on ? chunkRich(text) : chunkText(forTelegramHtml(text), TEXT_MAX_CHARS)),
      editsDrafts: true,
      minEditIntervalMs: 1000, // about one message per second per chat
      nativeStream: options.nativeDrafts,
      typing: true,
      typingRefreshMs: 4500, // a chat action lasts about 5 s
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

  /** Closes the keep-alive pool of the hot calls (the daemon calls this once no send can follow). */
  close(): Promise<void> {
    return this.#hot.close();
  }

  /** getFile, then the file from `<api_root>/file/bot<token>/<file_path>`; sizes are checked before each step. */
  async download(a: Attachment, o: { maxBytes: number; signal: AbortSignal }): Promise<Buffer> {
    const name = a.name ?? a.type;
    checkSize(name, a.size, o.maxBytes);
    const file = await this.#call('getFile', o.signal, (signal) => this.#api.getFile(a.id, sig(signal)));
    checkSize(name, file.file_size, o.maxBytes);
    if (!file.file_path) throw new CodedError('ATTACHMENT_UNAVAILABLE', `Telegram gave no file_path for ${name}`);
    return fetchLimited(`${this.#o.apiRoot}/file/bot${this.#token}/${file.file_path}`, { maxBytes: o.maxBytes, signal: o.signal, name });
  }

  async listen(platformDeliver: Deliver, signal: AbortSignal, onConnected: () => void): Promise<void> {
    const deliver = this.#answeringCallbacks(platformDeliver, signal);
    const me = await this.#call('getMe', signal, (s) => this.#api.getMe(sig(s)));
    this.#bot = { id: me.id, username: me.username };
    if (this.#o.mode === 'webhook') return this.#webhook(deliver, signal, onConnected);
    await this.#call('deleteWebhook', signal, (s) => this.#api.deleteWebhook({ drop_pending_updates: false }, sig(s)));
    onConnected();
    await this.#poll(deliver, signal);
  }

  /**
   * A button click (callback_query) is delivered as its sender's message; once stored, the
   * query is answered so the client stops its spinner (Telegram expects an answer to each).
   */
  #answeringCallbacks(deliver: Deliver, signal: AbortSignal): Deliver {
    return async (msg) => {
      const stored = await deliver(msg);
      const query = callbackQueryId(msg);
      // Not awaited: the rest of the update batch need not wait for the answer.
      if (query)
        void this.#call('answerCallbackQuery', signal, (s) => this.#api.answerCallbackQuery(query, undefined, sig(s))).catch((err: unknown) =>
          this.#o.log.debug({ err, channel: this.#o.id }, 'answerCallbackQuery failed'),
        );
      return stored;
    };
  }

  /** Each update is stored before the offset moves past it, so a crash loses nothing. */
  async #poll(deliver: Deliver, signal: AbortSignal): Promise<void> {
    const timeout = this.#o.pollTimeoutSeconds ?? POLL_TIMEOUT_S;
    // grammy's timeout (500 s by default) is per client, not per call: getUpdates gets a client
    // of its own, cut at the long poll plus POLL_MARGIN_S, so a hung server is noticed in under
    // a minute, not after 8. The other calls keep #api, cut at 30 s by #call as before.
    const poller = new Api(this.#token, { apiRoot: this.#o.apiRoot, timeoutSeconds: timeout + POLL_MARGIN_S });
    let offset = 0;
    while (!signal.aborted) {
      let updates: Awaited<ReturnType<Api['getUpdates']>>;
      try {
        updates = await poller.getUpdates({ offset, timeout, limit: 100, allowed_updates: [...ALLOWED_UPDATES] }, sig(signal));
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
    if (offset) await poller.getUpdates({ offset, limit: 1, timeout: 0 }, sig(AbortSignal.timeout(2000))).catch(() => {});
  }

  async #webhook(deliver: Deliver, signal: AbortSignal, onConnected: () => void): Promise<void> {
    if (!this.#webhookSecret || !this.#o.publicUrl)
      throw new ChannelError('CHANNEL_REQUEST_FAILED', 'webhook mode needs public_url and webhook_secret_*', { retryable: false });
    const path = `/webhooks/${this.#o.id}`;
    const remove = this.#o.http.route(
      'POST',
      path,
      webhookHandler({ channelId: this.#o.id, secret: this.#webhookSecret, bot: () => this.#bot!, deliver, log: this.#o.log }),
      { scheme: 'secret-token', describe: 'X-Telegram-Bot-Api-Secret-Token equals webhook_secret' },
    );
    try {
      const url = new URL(path, this.#o.publicUrl).toString();
      await this.#call('setWebhook', signal, (s) =>
        this.#api.setWebhook(url, { secret_token: this.#webhookSecret!, allowed_updates: [...ALLOWED_UPDATES] }, sig(s)),
      );
      onConnected();
      await untilAborted(signal);
    } finally {
      // The webhook stays set: Telegram keeps queueing updates while we restart.
      remove();
    }
  }

  #threadOf(t: { threadId?: string | undefined }) {
    return t.threadId ? { message_thread_id: Number(t.threadId) } : {};
  }

  /**
   * A native draft failed: a 429 is only a pause, a 404 means the server has no drafts, and
   * other failures count as strikes; drafts are off for this bot from then on (logged once),
   * so replies go as a message and its edits. The reply at hand already falls back that way.
   */
  #draftFailed(err: unknown): void {
    if (!this.#drafts || (err instanceof ChannelError && err.retryAfterMs !== undefined)) return;
    const missing = err instanceof ChannelError && isRichUnsupported(err.cause);
    if (!missing && ++this.#draftStrikes < NEWER_METHOD_STRIKES) return;
    this.#drafts = false;
    this.#o.log.warn(
      { channel: this.#o.id, err: errorMessage(err), failures: this.#draftStrikes },
      'this Bot API server fails native drafts; answers are sent and edited from now on',
    );
  }

  /** Sends a rich message or HTML; if Telegram refuses the HTML entities, the same text goes again as plain text. */
  async send(target: ReplyTarget, text: string, options: TransportOptions): Promise<MessageRef> {
    const replyTo = target.chatType !== 'dm' && target.replyToMessageId ? Number(target.replyToMessageId.split(':').at(-1)) : undefined;
    const common = {
      ...this.#threadOf(target),
      ...(replyTo ? { reply_parameters: { message_id: replyTo, allow_sending_without_reply: true } } : {}),
      // Approval questions carry inline keyboard buttons.
      ...(options.buttons?.length ? { reply_markup: { inline_keyboard: [options.buttons.map((b) => ({ text: b.label, callback_data: b.data }))] } } : {}),
    };
    const other = { ...common, link_preview_options: { is_disabled: true } };
    const html = async (signal: AbortSignal) => {
      try {
        return await this.#hot.sendMessage(target.chatId, markdownToTelegramHtml(text), { ...other, parse_mode: 'HTML' }, sig(signal));
      } catch (err) {
        if (!isEntityError(err)) throw err;
        return this.#hot.sendMessage(target.chatId, forTelegramHtml(text), other, sig(signal));
      }
    };
    const sent = await this.#sentCall(
      'sendMessage',
      options,
      (signal): Promise<{ message_id: number }> =>
        this.#rich.fits(text) && !options.buttons?.length
          ? this.#rich.run<{ message_id: number }>(
              'sendRichMessage',
              text,
              () => this.#hot.sendRichMessage(target.chatId, { markdown: toRichMarkdown(text) }, common, sig(signal)),
              () => html(signal),
            )
          : html(signal),
    );
    return { chatId: target.chatId, messageId: String(sent.message_id), ...(target.threadId ? { threadId: target.threadId } : {}) };
  }

  /** A hot call whose requests note in the caller's `sentAt` (if it asked) when they went out. */
  #sentCall<T>(what: string, options: TransportOptions, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
    return this.#hotCall(what, options.signal, notingSent(options.sentAt, fn));
  }

  async edit(ref: MessageRef, text: string, options: TransportOptions): Promise<void> {
    const notModifiedIsFine = (e: unknown) => {
      if (!isNotModified(e)) throw e;
    };
    const html = async (signal: AbortSignal) => {
      try {
        await this.#hot.editMessageText(
          ref.chatId,
          Number(ref.messageId),
          markdownToTelegramHtml(text),
          { parse_mode: 'HTML', link_preview_options: { is_disabled: true } },
          sig(signal),
        );
      } catch (err) {
        if (isNotModified(err)) return;
        if (!isEntityError(err)) throw err;
        await this.#hot.editMessageText(ref.chatId, Number(ref.messageId), forTelegramHtml(text), {}, sig(signal)).catch(notModifiedIsFine);
      }
    };
    await this.#sentCall('editMessageText', options, (signal) =>
      this.#rich.fits(text)
        ? this.#rich.run(
            'editMessageText',
            text,
            () =>
              this.#hot
                .editMessageText(ref.chatId, Number(ref.messageId), { markdown: toRichMarkdown(text) }, {}, sig(signal))
                .then(() => {}, notModifiedIsFine),
            () => html(signal),
          )
        : html(signal),
    );
  }

  /**
   * A voice note with sendVoice (Telegram plays OGG/Opus inline; other audio goes as a
   * document, which it does not), any other file with sendDocument; a multipart upload.
   */
  async sendFile(target: ReplyTarget, file: OutgoingFile, options: TransportOptions): Promise<MessageRef> {
    const input = new InputFile(file.bytes, file.name);
    const extra = this.#threadOf(target);
    const asVoice = file.voice && file.mime === 'audio/ogg';
    const sent = await this.#call(
      asVoice ? 'sendVoice' : 'sendDocument',
      options.signal,
      (signal): Promise<{ message_id: number }> =>
        asVoice ? this.#api.sendVoice(target.chatId, input, extra, sig(signal)) : this.#api.sendDocument(target.chatId, input, extra, sig(signal)),
    );
    return { chatId: target.chatId, messageId: String(sent.message_id), ...(target.threadId ? { threadId: target.threadId } : {}) };
  }

  async delete(ref: MessageRef, options: TransportOptions): Promise<void> {
    await this.#call('deleteMessage', options.signal, (signal) => this.#api.deleteMessage(ref.chatId, Number(ref.messageId), sig(signal)));
  }

  /** setMessageReaction: one emoji from Telegram's reaction list, or none to take it off. */
  async setReaction(ref: MessageRef, emoji: string, on: boolean, options: TransportOptions): Promise<void> {
    const reaction = on ? [{ type: 'emoji' as const, emoji: emoji as ReactionTypeEmoji['emoji'] }] : [];
    await this.#hotCall('setMessageReaction', options.signal, (signal) =>
      this.#hot.setMessageReaction(ref.chatId, Number(ref.messageId.split(':').at(-1)), reaction, {}, sig(signal)),
    );
  }

  async typing(target: ReplyTarget, options: TransportOptions): Promise<void> {
    await this.#hotCall('sendChatAction', options.signal, (signal) => this.#hot.sendChatAction(target.chatId, 'typing', this.#threadOf(target), sig(signal)));
  }

  /** sendRichMessageDraft (or sendMessageDraft) in private chats: an animated preview; the final text is a real message. */
  async openNativeStream(target: ReplyTarget): Promise<NativeStream | undefined> {
    if (!this.#drafts || target.chatType !== 'dm') return undefined;
    const draftId = randomInt(1, 2 ** 31 - 1);
    const chatId = Number(target.chatId);
    const thread = this.#threadOf(target);
    const draft = async (text: string, signal: AbortSignal) => {
      const html = () => this.#hot.sendMessageDraft(chatId, draftId, markdownToTelegramHtml(text), { ...thread, parse_mode: 'HTML' }, sig(signal));
      if (!this.#rich.fits(text)) return html();
      return this.#rich.run(
        'sendRichMessageDraft',
        text,
        () => this.#hot.sendRichMessageDraft(chatId, draftId, { markdown: toRichMarkdown(text) }, thread, sig(signal)),
        html,
      );
    };
    return {
      update: (text, o) =>
        this.#hotCall('sendMessageDraft', o.signal, (signal) => draft(text, signal)).then(
          () => void (this.#draftStrikes = 0),
          (err: unknown) => {
            if (!o.signal.aborted) this.#draftFailed(err);
            throw err;
          },
        ),
      finish: (text, o) => this.send(target, text, o),
      // A draft is a preview; the answer is a new message, which goes at once.
      finishSendsMessage: true,
    };
  }
}
