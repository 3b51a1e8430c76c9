import { type Api, GrammyError, HttpError } from 'grammy';
import { Pool } from 'undici';
import { dispatchAnswer } from '../../src/util/dispatch-answer.js';

/** The biggest answer a hot call may bring: a sent message is a few KiB; anything larger is refused, not buffered. */
const MAX_ANSWER_BYTES = 1024 * 1024;

/** What the Bot API answers: its result, or why it refused. */
type Answer = { ok: true; result: unknown } | { ok: false; error_code: number; description: string; parameters?: object };

/** The one header a hot call sends (undici adds host, content-length and connection). */
const JSON_HEADERS = { 'content-type': 'application/json' };

/**
 * The Bot API methods a reply makes per message (send, edit, drafts, typing, reactions),
 * with grammy `Api`'s signatures, payloads and error classes, over one undici keep-alive
 * pool. grammy's own client, even with a pooled `fetch`, builds per call an AbortController,
 * a 500 s timer and three promises to race, walks the payload for files and serializes it
 * through a replacer: a third of a small call's client CPU (`test/bench/http-client.ts`).
 * Here a call is a JSON body dispatched on the pool with the caller's signal (which
 * `platformCaller` already bounds in time), its answer read whole and parsed
 * (src/util/dispatch-answer.ts: a fifth to a third less client CPU per call than
 * `Pool.request`). What the Bot API refuses is a `GrammyError` (its
 * `error_code`, `description`, `parameters`), what fails on the way an `HttpError`, as grammy
 * throws them, so the adapter's error handling is the same for both clients.
 *
 * Payloads are plain JSON: these methods never upload a file, and the adapter builds them
 * without nulls (grammy drops nulls; `JSON.stringify` already drops undefined).
 * Idle sockets are unreferenced by undici, so the pool never holds the process open.
 */
export class HotBotApi {
  readonly #pool: Pool;
  /** `/bot<token>/` under the API root's own path (a Bot API server behind a path prefix). */
  readonly #prefix: string;

  constructor(token: string, apiRoot: string, options: { connections?: number; keepAliveTimeoutMs?: number } = {}) {
    const root = new URL(apiRoot);
    this.#pool = new Pool(root.origin, {
      // Opened only as a burst needs them: 1,000 conversations answered at once reached their
      // first message sooner with 64 than with 8 (first visible p99 median 507 against 669 ms,
      // six rounds each side by side, the load curve's 1,000 level, 2 Dec 2026).
      connections: options.connections ?? 64,
      keepAliveTimeout: options.keepAliveTimeoutMs ?? 30_000,
    });
    this.#prefix = `${root.pathname.replace(/\/+$/, '')}/bot${token}/`;
  }

  /**
   * One Bot API call: its `result`, a `GrammyError` when the Bot API refused it, an `HttpError`
   * when it did not get there or back. `signal` is typed as grammy's methods take it (its own
   * AbortSignal type); it is the platform's AbortSignal.
   */
  async call(method: string, payload: object, grammySignal?: unknown): Promise<unknown> {
    const signal = grammySignal as AbortSignal | undefined;
    let answer: Answer;
    try {
      const { body } = await dispatchAnswer(
        this.#pool,
        { path: this.#prefix + method, method: 'POST', headers: JSON_HEADERS, body: JSON.stringify(payload) },
        signal,
        MAX_ANSWER_BYTES,
      );
      // Over the limit, declared or as it grew: not read, an HttpError below.
      if (!body) throw new Error(`the answer is larger than ${MAX_ANSWER_BYTES} bytes`);
      answer = JSON.parse(body.toString('utf8')) as Answer;
    } catch (err) {
      throw new HttpError(`Network request for '${method}' failed!`, err);
    }
    if (typeof answer !== 'object' || answer === null)
      throw new HttpError(`Network request for '${method}' failed!`, new Error(`the Bot API answered ${JSON.stringify(answer)}, not an object`));
    if (answer.ok) return answer.result;
    throw new GrammyError(`Call to '${method}' failed!`, answer, method, payload as Record<string, unknown>);
  }

  readonly sendMessage: Api['sendMessage'] = (chat_id, text, other, signal) =>
    this.call('sendMessage', { chat_id, text, ...other }, signal) as ReturnType<Api['sendMessage']>;

  readonly sendRichMessage: Api['sendRichMessage'] = (chat_id, rich_message, other, signal) =>
    this.call('sendRichMessage', { chat_id, rich_message, ...other }, signal) as ReturnType<Api['sendRichMessage']>;

  readonly editMessageText: Api['editMessageText'] = (chat_id, message_id, text_or_rich_message, other, signal) =>
    this.call(
      'editMessageText',
      typeof text_or_rich_message === 'string'
        ? { chat_id, message_id, text: text_or_rich_message, ...other }
        : { chat_id, message_id, rich_message: text_or_rich_message, ...other },
      signal,
    ) as ReturnType<Api['editMessageText']>;

  readonly sendMessageDraft: Api['sendMessageDraft'] = (chat_id, draft_id, text, other, signal) =>
    this.call('sendMessageDraft', { chat_id, draft_id, text, ...other }, signal) as ReturnType<Api['sendMessageDraft']>;

  readonly sendRichMessageDraft: Api['sendRichMessageDraft'] = (chat_id, draft_id, rich_message, other, signal) =>
    this.call('sendRichMessageDraft', { chat_id, draft_id, rich_message, ...other }, signal) as ReturnType<Api['sendRichMessageDraft']>;

  readonly setMessageReaction: Api['setMessageReaction'] = (chat_id, message_id, reaction, other, signal) =>
    this.call('setMessageReaction', { chat_id, message_id, reaction, ...other }, signal) as ReturnType<Api['setMessageReaction']>;

  readonly sendChatAction: Api['sendChatAction'] = (chat_id, action, other, signal) =>
    this.call('sendChatAction', { chat_id, action, ...other }, signal) as ReturnType<Api['sendChatAction']>;

  /** Closes the pool's sockets: whoever made this client releases it. */
  close(): Promise<void> {
    return this.#pool.close();
  }
}
