import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type Fault =
  | { status: 429; retryAfter: number }
  | { status: 400 | 401 | 403 | 409 | 500 | 502; description?: string }
  | { drop: true }
  /** An answer that is not the Bot API's: this status with this raw body (a proxy's or emulator's error page). */
  | { status: number; raw: string }
  | { delayMs: number };

export interface Call {
  method: string;
  body: Record<string, any>;
  at: number;
}

export interface StoredMessage {
  chatId: number;
  messageId: number;
  threadId?: number;
  replyTo?: number;
  /** As sent (HTML when parse_mode is HTML; the Markdown of a rich message). */
  text: string;
  parseMode?: string;
  /** Sent or last edited as a rich message (`rich_message.markdown`). */
  rich?: boolean;
  deleted: boolean;
  edits: number;
  /** The inline keyboard, as sent; an edit without one removes it, as Telegram does. */
  replyMarkup?: { inline_keyboard: Array<Array<{ text: string; callback_data?: string }>> };
}

const BOT = { id: 7000001, is_bot: true, first_name: 'Channeld Test', username: 'channeld_test_bot' };
const ALLOWED_TAGS = new Set(['b', 'strong', 'i', 'em', 'u', 'ins', 's', 'strike', 'del', 'code', 'pre', 'a', 'span', 'tg-spoiler', 'blockquote', 'tg-emoji']);

/** Telegram's visible length: tags removed, entities decoded. */
export function visibleText(text: string, parseMode?: string): string {
  if (parseMode !== 'HTML') return text;
  return text
    .replace(/<[^>]+>/g, '')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&amp;/g, '&');
}

/** Like Telegram: unknown or unbalanced tags are "can't parse entities". */
function htmlProblem(text: string): string | undefined {
  const stack: string[] = [];
  for (const m of text.matchAll(/<(\/?)([a-z-]+)[^>]*>/g)) {
    const [, close, tag] = m;
    if (!ALLOWED_TAGS.has(tag!)) return `Unsupported start tag "${tag}"`;
    if (!close) stack.push(tag!);
    else if (stack.pop() !== tag) return `Can't find end tag corresponding to start tag "${tag}"`;
  }
  return stack.length ? `Can't find end tag corresponding to start tag "${stack.at(-1)}"` : undefined;
}

export interface FakeTelegramOptions {
  /**
   * Serve rich messages (sendRichMessage, sendRichMessageDraft, editMessageText with
   * `rich_message`), with their limits. Off by default: then the fake is an older server,
   * which does not know those methods (404) and reads an edit without `text` as empty.
   */
  richMessages?: boolean;
  /**
   * Every rich call (sendRichMessage, sendRichMessageDraft, an edit with `rich_message`) gets
   * this HTTP status and raw body instead, as from a proxy or emulator that lacks them.
   */
  richAnswer?: { status: number; body: string };
}

const RICH_MAX_CHARS = 32_768;
const RICH_MAX_BLOCKS = 500;

/** Blocks as the fake counts them: paragraphs, headings, list items, table rows, quote lines, code blocks. */
function richBlockCount(md: string): number {
  let n = 0;
  let inCode = false;
  let inParagraph = false;
  for (const line of md.split('\n')) {
    if (/^ {0,3}(`{3,}|~{3,})/.test(line)) {
      if (!inCode) n++;
      inCode = !inCode;
      inParagraph = false;
      continue;
    }
    if (inCode) continue;
    if (line.trim() === '') inParagraph = false;
    else if (/^\s*([-*+]|\d+[.)]|#{1,6}|>|\|)/.test(line)) {
      n++;
      inParagraph = false;
    } else if (!inParagraph) {
      n++;
      inParagraph = true;
    }
  }
  return n;
}

/**
 * A Bot API server on 127.0.0.1 for grammy: getMe, getUpdates with real offset confirmation
 * and long polling, sendMessage, editMessageText (with Telegram's "not modified" and length
 * errors), deleteMessage, sendChatAction, sendMessageDraft, setMessageReaction, setWebhook,
 * deleteWebhook, and (when asked) rich messages. Faults are queued per method, or given as a
 * time window of 429s; every call is logged.
 */
export class FakeTelegram {
  readonly calls: Call[] = [];
  /** Files the bot sent (sendVoice, sendDocument), with their bytes. */
  readonly files: Array<{ method: string; chatId: number; name: string; bytes: Buffer; messageId: number }> = [];
  readonly messages: StoredMessage[] = [];
  readonly drafts: Array<{ chatId: number; draftId: number; text: string; rich?: boolean }> = [];
  /** Reactions the bot has set, by `chatId:messageId` (an empty list once removed). */
  readonly reactions = new Map<string, string[]>();
  webhook: { url: string; secret?: string } | undefined;
  readonly bot = BOT;
  url = '';
  #updates: Array<{ update_id: number; [k: string]: unknown }> = [];
  #nextUpdate = 1;
  #nextMessage = new Map<number, number>();
  #waiters = new Set<() => void>();
  /** The update types the bot asked for (getUpdates/setWebhook allowed_updates); others are never sent. */
  #allowed: string[] | undefined;
  /** Callback queries sent to the bot and not yet answered. */
  readonly #openQueries = new Set<string>();
  #nextQuery = 1;
  /** answerCallbackQuery calls, in order. */
  readonly answeredQueries: string[] = [];
  /** Methods whose client hung up (aborted the request) while a `delayMs` fault held the answer. */
  readonly hungUp: string[] = [];
  readonly #faults = new Map<string, Fault[]>();
  readonly #rich: boolean;
  readonly #richAnswer: { status: number; body: string } | undefined;
  #limitWindow: { methods: Set<string>; untilMs: number } | undefined;
  readonly #server: Server;
  readonly #sockets = new Set<import('node:net').Socket>();

  constructor(
    readonly token = '123456:TEST-token-abcdefghijklmnopqrstuvwxyz',
    options: FakeTelegramOptions = {},
  ) {
    this.#rich = options.richMessages ?? false;
    this.#richAnswer = options.richAnswer;
    this.#server = createServer((req, res) => void this.#handle(req, res));
    this.#server.on('connection', (s) => {
      this.#sockets.add(s);
      s.on('close', () => this.#sockets.delete(s));
    });
  }

  async start(): Promise<string> {
    await new Promise<void>((r) => this.#server.listen(0, '127.0.0.1', () => r()));
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
    return this.url;
  }

  async close(): Promise<void> {
    for (const w of this.#waiters) w();
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((r) => this.#server.close(() => r()));
  }

  /** Holds an answer like a slow server; a client that hangs up ends the wait and is noted. */
  #hold(res: ServerResponse, method: string, delayMs: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, delayMs);
      function done() {
        clearTimeout(timer);
        res.off('close', hungUp);
        resolve();
      }
      const hungUp = () => {
        this.hungUp.push(method);
        done();
      };
      res.once('close', hungUp);
    });
  }

  /** Cuts every open connection (long polls included), as a network drop would. */
  dropConnections(): void {
    for (const s of this.#sockets) s.destroy();
  }

  /** The next `times` calls of `method` get `fault`. */
  fail(method: string, fault: Fault, times = 1): void {
    const list = this.#faults.get(method) ?? [];
    for (let i = 0; i < times; i++) list.push(fault);
    this.#faults.set(method, list);
  }

  /**
   * Every call of `methods` gets 429 for the next `durationMs`, with `retry_after` saying (in
   * whole seconds, as Telegram does) how long the limit still lasts.
   */
  rateLimitFor(durationMs: number, methods: string[]): void {
    this.#limitWindow = { methods: new Set(methods), untilMs: Date.now() + durationMs };
  }

  callsOf(method: string): Call[] {
    return this.calls.filter((c) => c.method === method);
  }

  /** Visible texts of the bot's live messages in a chat (and topic), in send order. */
  texts(chatId: number, threadId?: number): string[] {
    return this.messages
      .filter((m) => m.chatId === chatId && !m.deleted && (threadId === undefined || m.threadId === threadId))
      .map((m) => visibleText(m.text, m.parseMode));
  }

  /** Pending updates not yet confirmed by an offset. */
  get pendingUpdates(): number {
    return this.#updates.length;
  }

  // ——— acting as users ———

  #push(message: Record<string, unknown>): { update_id: number; message: Record<string, any> } {
    const update = { update_id: this.#nextUpdate++, message };
    this.#updates.push(update);
    for (const w of [...this.#waiters]) w();
    return update as never;
  }

  #userMessage(chat: Record<string, unknown>, text: string, from: { id: number; first_name: string; is_bot?: boolean }, extra: Record<string, unknown> = {}) {
    const chatId = chat.id as number;
    const messageId = this.#newMessageId(chatId);
    return { message_id: messageId, date: Math.floor(Date.now() / 1000), chat, from: { is_bot: false, ...from }, text, ...extra };
  }

  #newMessageId(chatId: number): number {
    const n = (this.#nextMessage.get(chatId) ?? 100) + 1;
    this.#nextMessage.set(chatId, n);
    return n;
  }

  /**
   * A user presses an inline keyboard button under one of the bot's messages: a
   * callback_query update with the button's callback_data. Like Telegram, only data that is
   * on a button of that message can be sent.
   */
  click(message: StoredMessage, label: string, from = { id: 42, first_name: 'Ada' }) {
    const button = message.replyMarkup?.inline_keyboard.flat().find((b) => b.text === label);
    if (!button?.callback_data) throw new Error(`message ${message.messageId} has no button "${label}"`);
    const id = String(this.#nextQuery++);
    this.#openQueries.add(id);
    const chat =
      message.chatId > 0
        ? { id: message.chatId, type: 'private', first_name: from.first_name }
        : { id: message.chatId, type: 'supergroup', title: 'Test group' };
    const update = {
      update_id: this.#nextUpdate++,
      callback_query: {
        id,
        from: { is_bot: false, ...from },
        chat_instance: `ci${message.chatId}`,
        data: button.callback_data,
        message: { message_id: message.messageId, date: 0, chat, from: BOT, text: visibleText(message.text, message.parseMode) },
      },
    };
    this.#updates.push(update);
    for (const w of [...this.#waiters]) w();
    return update;
  }

  /** A private message from a user. */
  dm(text: string, from = { id: 42, first_name: 'Ada' }) {
    return this.#push(this.#userMessage({ id: from.id, type: 'private', first_name: from.first_name }, text, from));
  }

  /**
   * A group message; `mention` adds an @bot mention entity, `command` a bot_command entity over
   * the leading "/cmd" or "/cmd@bot", `replyTo` replies to one of the bot's messages, `topic`
   * posts in a forum topic.
   */
  group(
    text: string,
    o: {
      chatId?: number;
      from?: { id: number; first_name: string; is_bot?: boolean };
      mention?: boolean;
      command?: boolean;
      replyTo?: number;
      topic?: number;
    } = {},
  ) {
    const chatId = o.chatId ?? -1001234;
    const from = o.from ?? { id: 43, first_name: 'Bob' };
    const body = o.mention ? `@${BOT.username} ${text}` : text;
    const extra: Record<string, unknown> = {};
    if (o.mention) extra.entities = [{ type: 'mention', offset: 0, length: BOT.username.length + 1 }];
    if (o.command) extra.entities = [{ type: 'bot_command', offset: 0, length: /^\S+/.exec(body)![0].length }];
    if (o.replyTo !== undefined) extra.reply_to_message = { message_id: o.replyTo, date: 0, chat: { id: chatId, type: 'supergroup' }, from: BOT, text: '…' };
    if (o.topic !== undefined) Object.assign(extra, { message_thread_id: o.topic, is_topic_message: true });
    return this.#push(
      this.#userMessage({ id: chatId, type: 'supergroup', title: 'Test group', ...(o.topic !== undefined ? { is_forum: true } : {}) }, body, from, extra),
    );
  }

  // ——— the Bot API ———

  // ——— files (getFile + /file/bot<token>/<file_path>) ———

  readonly #files = new Map<string, { bytes: Buffer; size: number; path: string; dripMs?: number }>();
  /** file_paths downloaded through /file/bot<token>/..., in order. */
  readonly downloads: string[] = [];

  /** Stores a file as Telegram would; `size` overrides the reported size (a huge file without the bytes). */
  addFile(bytes: Buffer, o: { size?: number; ext?: string; dripMs?: number } = {}): { file_id: string; file_unique_id: string; file_size: number } {
    const n = this.#files.size + 1;
    const file_id = `FILE${n}-${'x'.repeat(20)}`;
    this.#files.set(file_id, {
      bytes,
      size: o.size ?? bytes.length,
      path: `documents/file_${n}.${o.ext ?? 'bin'}`,
      ...(o.dripMs !== undefined ? { dripMs: o.dripMs } : {}),
    });
    return { file_id, file_unique_id: `U${n}`, file_size: o.size ?? bytes.length };
  }

  /** A private message with a photo (sizes smallest first, as Telegram sends them) and an optional caption. */
  dmPhoto(bytes: Buffer, caption?: string, from = { id: 42, first_name: 'Ada' }) {
    const small = this.addFile(bytes.subarray(0, Math.min(16, bytes.length)), { ext: 'jpg' });
    const large = this.addFile(bytes, { ext: 'jpg' });
    const photo = [
      { ...small, width: 90, height: 90 },
      { ...large, width: 1280, height: 960 },
    ];
    const m = this.#userMessage({ id: from.id, type: 'private', first_name: from.first_name }, '', from, { photo, ...(caption ? { caption } : {}) });
    delete (m as { text?: string }).text;
    return this.#push(m);
  }

  /** A private voice note (OGG/Opus as Telegram records it; `duration` in seconds, as the Bot API gives it). */
  dmVoice(bytes: Buffer, duration = 2, from = { id: 42, first_name: 'Ada' }) {
    const f = this.addFile(bytes, { ext: 'oga' });
    const m = this.#userMessage({ id: from.id, type: 'private', first_name: from.first_name }, '', from, { voice: { ...f, duration, mime_type: 'audio/ogg' } });
    delete (m as { text?: string }).text;
    return this.#push(m);
  }

  /** A private message with a document; `dripMs` serves its bytes one per `dripMs` (a stalled download). */
  dmDocument(
    bytes: Buffer,
    doc: { file_name: string; mime_type: string; size?: number; dripMs?: number },
    caption?: string,
    from = { id: 42, first_name: 'Ada' },
  ) {
    const f = this.addFile(bytes, {
      ext: doc.file_name.split('.').pop()!,
      ...(doc.size !== undefined ? { size: doc.size } : {}),
      ...(doc.dripMs !== undefined ? { dripMs: doc.dripMs } : {}),
    });
    const m = this.#userMessage({ id: from.id, type: 'private', first_name: from.first_name }, '', from, {
      document: { ...f, file_name: doc.file_name, mime_type: doc.mime_type },
      ...(caption ? { caption } : {}),
    });
    delete (m as { text?: string }).text;
    return this.#push(m);
  }

  #serveFile(req: IncomingMessage, res: ServerResponse): boolean {
    const f = /^\/file\/bot([^/]+)\/(.+)$/.exec(req.url ?? '');
    if (!f) return false;
    this.calls.push({ method: 'file', body: { path: f[2] }, at: Date.now() });
    const file = [...this.#files.values()].find((x) => x.path === f[2]);
    if (f[1] !== this.token || !file) {
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: false, error_code: 404, description: 'Not Found' }));
      return true;
    }
    this.downloads.push(file.path);
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(file.bytes.length) });
    if (file.dripMs === undefined) {
      res.end(file.bytes);
      return true;
    }
    // One byte per dripMs until the client gives up (or the socket is cut at close).
    let i = 0;
    const t = setInterval(() => {
      if (i < file.bytes.length) res.write(file.bytes.subarray(i, ++i));
      else res.end();
    }, file.dripMs);
    res.on('close', () => clearInterval(t));
    return true;
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method === 'GET' && this.#serveFile(req, res)) return;
    const m = /^\/bot([^/]+)\/(\w+)$/.exec(req.url ?? '');
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    const reply = (status: number, payload: unknown) => {
      if (res.destroyed) return;
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(payload));
    };
    const ok = (result: unknown) => reply(200, { ok: true, result });
    const no = (code: number, description: string, parameters?: unknown) =>
      reply(code, { ok: false, error_code: code, description, ...(parameters ? { parameters } : {}) });
    if (!m) return no(404, 'Not Found');
    const [, token, method] = m;
    // A file upload (sendVoice, sendDocument) is a multipart form: its fields, and the file's bytes.
    const multipart = String(req.headers['content-type'] ?? '').startsWith('multipart/form-data');
    const body = (multipart ? await formFields(req.headers['content-type']!, Buffer.concat(chunks)) : raw ? JSON.parse(raw) : {}) as Record<string, any>;
    this.calls.push({ method: method!, body, at: Date.now() });
    if (token !== this.token) return no(401, 'Unauthorized');
    const w = this.#limitWindow;
    if (w?.methods.has(method!) && Date.now() < w.untilMs) {
      const retryAfter = Math.max(1, Math.ceil((w.untilMs - Date.now()) / 1000));
      return no(429, `Too Many Requests: retry after ${retryAfter}`, { retry_after: retryAfter });
    }
    const rawAnswer = (a: { status: number; body: string }) => void (res.destroyed || res.writeHead(a.status, { 'content-type': 'text/html' }).end(a.body));
    const richCall = method === 'sendRichMessage' || method === 'sendRichMessageDraft' || (method === 'editMessageText' && body.rich_message !== undefined);
    if (this.#richAnswer && richCall) return rawAnswer(this.#richAnswer);
    const fault = this.#faults.get(method!)?.shift();
    if (fault) {
      if ('drop' in fault) return void req.socket.destroy();
      if ('raw' in fault) return rawAnswer({ status: fault.status, body: fault.raw });
      if ('delayMs' in fault) await this.#hold(res, method!, fault.delayMs);
      else if (fault.status === 429) return no(429, `Too Many Requests: retry after ${fault.retryAfter}`, { retry_after: fault.retryAfter });
      else
        return no(
          fault.status,
          fault.description ??
            {
              400: 'Bad Request',
              401: 'Unauthorized',
              403: 'Forbidden: bot was blocked by the user',
              409: 'Conflict: terminated by other getUpdates request; make sure that only one bot instance is running',
              500: 'Internal Server Error',
              502: 'Bad Gateway',
            }[fault.status],
        );
    }
    switch (method) {
      case 'getFile': {
        const file = this.#files.get(String(body.file_id));
        if (!file) return no(400, 'Bad Request: invalid file_id');
        // The Bot API serves files up to 20 MB to bots.
        if (file.size > 20 * 1024 * 1024) return no(400, 'Bad Request: file is too big');
        return ok({ file_id: body.file_id, file_unique_id: 'U', file_size: file.size, file_path: file.path });
      }
      case 'getMe':
        return ok(BOT);
      case 'deleteWebhook':
        this.webhook = undefined;
        return ok(true);
      case 'setWebhook':
        if (Array.isArray(body.allowed_updates)) this.#allowed = body.allowed_updates as string[];
        this.webhook = { url: body.url, ...(body.secret_token ? { secret: body.secret_token } : {}) };
        return ok(true);
      case 'getUpdates':
        return this.#getUpdates(body, res, ok);
      case 'sendChatAction':
        return ok(true);
      case 'sendMessageDraft':
        if (!body.draft_id) return no(400, 'Bad Request: draft_id must be non-zero');
        this.drafts.push({ chatId: Number(body.chat_id), draftId: body.draft_id, text: body.text });
        return ok(true);
      case 'setMessageReaction': {
        const key = `${body.chat_id}:${body.message_id}`;
        this.reactions.set(
          key,
          ((body.reaction ?? []) as Array<{ type: string; emoji?: string }>).map((r) => r.emoji ?? r.type),
        );
        return ok(true);
      }
      case 'sendRichMessageDraft':
      case 'sendRichMessage':
      case 'sendMessage': {
        const rich = method !== 'sendMessage';
        if (rich && !this.#rich) return no(404, 'Not Found: method not found');
        const problem = rich ? this.#richProblem(body.rich_message) : this.#textProblem(body.text, body.parse_mode);
        if (problem) return no(400, problem);
        const chatId = Number(body.chat_id);
        const markup = this.#markupProblem(body.reply_markup);
        if (markup) return no(400, markup);
        if (method === 'sendRichMessageDraft') {
          if (!body.draft_id) return no(400, 'Bad Request: draft_id must be non-zero');
          this.drafts.push({ chatId, draftId: body.draft_id, text: body.rich_message.markdown, rich: true });
          return ok(true);
        }
        const text = rich ? body.rich_message.markdown : body.text;
        const msg: StoredMessage = {
          chatId,
          messageId: this.#newMessageId(chatId),
          text,
          parseMode: rich ? undefined : body.parse_mode,
          ...(rich ? { rich: true } : {}),
          deleted: false,
          edits: 0,
          ...(body.reply_markup ? { replyMarkup: body.reply_markup } : {}),
          ...(body.message_thread_id ? { threadId: body.message_thread_id } : {}),
          ...(body.reply_parameters ? { replyTo: body.reply_parameters.message_id } : {}),
        };
        this.messages.push(msg);
        return ok({
          message_id: msg.messageId,
          date: Math.floor(Date.now() / 1000),
          chat: { id: chatId, type: chatId > 0 ? 'private' : 'supergroup' },
          from: BOT,
          ...(rich ? { rich_message: { markdown: text } } : { text: visibleText(msg.text, msg.parseMode) }),
        });
      }
      case 'editMessageText': {
        const msg = this.messages.find((x) => x.chatId === Number(body.chat_id) && x.messageId === body.message_id && !x.deleted);
        if (!msg) return no(400, 'Bad Request: message to edit not found');
        if (this.#rich && body.rich_message !== undefined) {
          const problem = this.#richProblem(body.rich_message);
          if (problem) return no(400, problem);
          if (msg.rich && msg.text === body.rich_message.markdown)
            return no(
              400,
              'Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message',
            );
          Object.assign(msg, { text: body.rich_message.markdown, parseMode: undefined, rich: true });
          msg.edits++;
          return ok({ message_id: msg.messageId, date: 0, chat: { id: msg.chatId, type: 'private' }, rich_message: { markdown: msg.text } });
        }
        const problem = this.#textProblem(body.text, body.parse_mode);
        if (problem) return no(400, problem === 'Bad Request: message is too long' ? 'Bad Request: MESSAGE_TOO_LONG' : problem);
        if (visibleText(body.text, body.parse_mode) === visibleText(msg.text, msg.parseMode)) {
          return no(
            400,
            'Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message',
          );
        }
        msg.text = body.text;
        msg.parseMode = body.parse_mode;
        delete msg.rich;
        msg.edits++;
        if (body.reply_markup) msg.replyMarkup = body.reply_markup;
        else delete msg.replyMarkup;
        return ok({ message_id: msg.messageId, date: 0, chat: { id: msg.chatId, type: 'private' }, text: visibleText(msg.text, msg.parseMode) });
      }
      case 'answerCallbackQuery': {
        if (!this.#openQueries.delete(String(body.callback_query_id)))
          return no(400, 'Bad Request: query is too old and response timeout expired or query ID is invalid');
        this.answeredQueries.push(String(body.callback_query_id));
        return ok(true);
      }
      case 'sendVoice':
      case 'sendDocument': {
        const file = (method === 'sendVoice' ? body.voice : body.document) as { name: string; bytes: Buffer } | undefined;
        if (!file?.bytes) return no(400, `Bad Request: there is no ${method === 'sendVoice' ? 'voice' : 'document'} in the request`);
        const chatId = Number(body.chat_id);
        const message_id = this.#newMessageId(chatId);
        this.files.push({ method: method!, chatId, name: file.name, bytes: file.bytes, messageId: message_id });
        return ok({ message_id, chat: { id: chatId }, date: Math.floor(Date.now() / 1000) });
      }
      case 'deleteMessage': {
        const msg = this.messages.find((x) => x.chatId === Number(body.chat_id) && x.messageId === body.message_id && !x.deleted);
        if (!msg) return no(400, 'Bad Request: message to delete not found');
        msg.deleted = true;
        return ok(true);
      }
      default:
        return no(404, 'Not Found: method not found');
    }
  }

  #richProblem(rich: { markdown?: unknown } | undefined): string | undefined {
    const md = rich?.markdown;
    if (typeof md !== 'string' || md.trim() === '') return 'Bad Request: rich message is empty';
    if (md.length > RICH_MAX_CHARS) return 'Bad Request: RICH_MESSAGE_TOO_LONG';
    if (richBlockCount(md) > RICH_MAX_BLOCKS) return 'Bad Request: RICH_MESSAGE_TOO_MANY_BLOCKS';
    return undefined;
  }

  #textProblem(text: string, parseMode?: string): string | undefined {
    if (typeof text !== 'string' || text.trim() === '') return 'Bad Request: message text is empty';
    if (parseMode === 'HTML') {
      const p = htmlProblem(text);
      if (p) return `Bad Request: can't parse entities: ${p}`;
    }
    if (visibleText(text, parseMode).length > 4096) return 'Bad Request: message is too long';
    return undefined;
  }

  /** Inline keyboards as Telegram checks them: callback_data of 1 to 64 bytes. */
  #markupProblem(markup: unknown): string | undefined {
    if (markup === undefined) return undefined;
    const rows = (markup as { inline_keyboard?: unknown }).inline_keyboard;
    if (!Array.isArray(rows)) return 'Bad Request: reply markup is not an inline keyboard';
    for (const b of rows.flat() as Array<{ text?: string; callback_data?: string }>) {
      if (!b.text) return 'Bad Request: text buttons are unallowed in the inline keyboard';
      if (b.callback_data !== undefined && (Buffer.byteLength(b.callback_data) < 1 || Buffer.byteLength(b.callback_data) > 64))
        return 'Bad Request: BUTTON_DATA_INVALID';
    }
    return undefined;
  }

  async #getUpdates(body: Record<string, any>, res: ServerResponse, ok: (r: unknown) => void): Promise<void> {
    if (Array.isArray(body.allowed_updates)) this.#allowed = body.allowed_updates as string[];
    // Updates of types the bot did not ask for are never delivered (an empty list: all types).
    const allowed = this.#allowed;
    if (allowed?.length) this.#updates = this.#updates.filter((u) => Object.keys(u).every((k) => k === 'update_id' || allowed.includes(k)));
    const offset = Number(body.offset ?? 0);
    // An offset confirms every update below it: they are gone for good.
    if (offset > 0) this.#updates = this.#updates.filter((u) => u.update_id >= offset);
    const limit = Number(body.limit ?? 100);
    const take = () => this.#updates.slice(0, limit);
    if (take().length || !body.timeout) return ok(take());
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, Number(body.timeout) * 1000);
      this.#waiters.add(done);
      res.once('close', done); // the client gave up (abort, shutdown)
    });
    ok(take());
  }
}

/**
 * A multipart/form-data body's fields (RFC 7578), parsed here rather than by undici's
 * `Request.formData()`: Node 22's parser refuses grammy's uploads ("Failed to parse body as
 * FormData": grammy writes the filename unquoted) where later Nodes take them. A part
 * with a filename becomes `{ name, bytes }`, any other its text.
 */
async function formFields(contentType: string, body: Buffer): Promise<Record<string, unknown>> {
  const boundary = /boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType);
  if (!boundary) throw new Error(`multipart without a boundary: ${contentType}`);
  const delimiter = Buffer.from(`--${boundary[1] ?? boundary[2]}`);
  const out: Record<string, unknown> = {};
  let at = body.indexOf(delimiter);
  while (at !== -1) {
    const start = at + delimiter.length;
    // "--" after a delimiter closes the body.
    if (body.subarray(start, start + 2).toString() === '--') break;
    const next = body.indexOf(delimiter, start);
    if (next === -1) break;
    // The part sits between the delimiter's line break and the CRLF before the next one.
    const part = body.subarray(body.indexOf('\r\n', start) + 2, next - 2);
    const split = part.indexOf('\r\n\r\n');
    const head = part.subarray(0, split).toString('utf8');
    const content = part.subarray(split + 4);
    const disposition = /content-disposition:[^\r\n]*/i.exec(head)?.[0] ?? '';
    // Quoted or not: grammy writes `filename=answer.ogg` bare (which Node 22's parser refuses).
    const param = (key: string) => {
      const m = new RegExp(`\\b${key}=(?:"([^"]*)"|([^;\\s]*))`, 'i').exec(disposition);
      return m ? (m[1] ?? m[2]) : undefined;
    };
    const name = param('name');
    const filename = param('filename');
    if (name !== undefined) out[name] = filename === undefined ? content.toString('utf8') : { name: filename, bytes: Buffer.from(content) };
    at = next;
  }
  // The Bot API's `attach://NAME`: the file is the form's part NAME (grammy uploads so).
  for (const [k, v] of Object.entries(out)) if (typeof v === 'string' && v.startsWith('attach://')) out[k] = out[v.slice('attach://'.length)];
  return out;
}
