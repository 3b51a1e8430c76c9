import type { Logger } from 'pino';
import { ChannelError, errorMessage } from '../../src/contracts/errors.js';
import { classifyTelegramError, isDefiniteRefusal, isRichContentError, isRichUnsupported } from './errors.js';
import { forTelegramHtml } from './markdown.js';
import { richFits, TEXT_MAX_CHARS } from './rich.js';

/**
 * Rich calls (or native drafts) that failed without a Bot API answer saying why, while the
 * HTML path then worked: after this many in a row the server is taken not to serve them,
 * and this bot stops asking (a proxy or emulator answering 500 for a method it lacks).
 */
export const NEWER_METHOD_STRIKES = 3;

/**
 * Whether a bot's replies go as rich messages, and the fallback to HTML when they cannot:
 * on until the server refuses them once, or fails them NEWER_METHOD_STRIKES times in a row
 * while HTML works; then HTML for good.
 */
export class RichFallback {
  #on: boolean;
  /** Rich calls in a row that failed for no definite reason while HTML then worked. */
  #strikes = 0;
  readonly #channel: string;
  readonly #log: Logger;

  constructor(on: boolean, channel: string, log: Logger) {
    this.#on = on;
    this.#channel = channel;
    this.#log = log;
  }

  /** Rich messages are still on for this bot. */
  get on(): boolean {
    return this.#on;
  }

  /** Whether `text` goes as a rich message: rich messages on, accepted so far, and within their limits. */
  fits(text: string): boolean {
    return this.#on && richFits(text);
  }

  /**
   * Runs a rich-message call; on an older server's refusal remembers it for this bot, and on
   * any refusal runs `html` instead. A text too long for the HTML path cannot go that way:
   * the reply is planned again at the HTML limit (CHANNEL_FORMAT_REFUSED, retried at once).
   * A failure with no definite answer (a 5xx, a body that is not a Bot API answer, a dropped
   * connection) also goes the HTML way for this message: the answer never waits on a method
   * the server may not have. A 429 or a refusal about the chat itself is thrown as it is.
   */
  async run<T>(method: string, text: string, rich: () => Promise<T>, html: () => Promise<T>): Promise<T> {
    try {
      const done = await rich();
      this.#strikes = 0;
      return done;
    } catch (err) {
      if (isRichUnsupported(err)) {
        if (this.#on)
          this.#log.info(
            { channel: this.#channel, method, err: errorMessage(err) },
            'this Bot API server refused rich messages; using HTML messages from now on',
          );
        this.#on = false;
      } else if (isRichContentError(err)) {
        if (forTelegramHtml(text).length > TEXT_MAX_CHARS) {
          // Too long for one HTML message: only a plan at the HTML limit can deliver it.
          this.#log.warn({ channel: this.#channel, method, err: errorMessage(err) }, 'Telegram refused a long rich message; using HTML messages from now on');
          this.#on = false;
        } else this.#log.warn({ channel: this.#channel, method, err: errorMessage(err) }, 'Telegram refused a rich message; sending it as HTML');
      } else if (isDefiniteRefusal(err)) throw err;
      else return this.#failed(method, text, err, html);
      if (forTelegramHtml(text).length > TEXT_MAX_CHARS)
        throw new ChannelError('CHANNEL_FORMAT_REFUSED', `Telegram ${method}: rich message refused and too long for a text message`, { cause: err });
      return html();
    }
  }

  /**
   * A rich call failed with no definite answer. The message goes as HTML; if that works, the
   * rich failure counts as a strike against the server (a failing server fails both, and
   * then nothing is counted). A text longer than one HTML message cannot be tried that way:
   * the strike is counted and the failure thrown (retried with backoff), and at the last
   * strike the reply is planned again at the HTML limit.
   */
  async #failed<T>(method: string, text: string, err: unknown, html: () => Promise<T>): Promise<T> {
    const reason = errorMessage(classifyTelegramError(err, method));
    if (forTelegramHtml(text).length > TEXT_MAX_CHARS) {
      if (!this.#strike(method, reason)) throw err;
      throw new ChannelError('CHANNEL_FORMAT_REFUSED', `Telegram ${method}: rich messages failed and the text is too long for one text message`, {
        cause: err,
      });
    }
    const done = await html();
    if (!this.#strike(method, reason)) this.#log.warn({ channel: this.#channel, method, err: reason }, 'Telegram rich message failed; sent as HTML');
    return done;
  }

  /** Counts one rich failure; at the last strike rich messages are off for this bot (logged once). True then. */
  #strike(method: string, reason: string): boolean {
    if (!this.#on) return true;
    if (++this.#strikes < NEWER_METHOD_STRIKES) return false;
    this.#on = false;
    this.#log.warn(
      { channel: this.#channel, method, err: reason, failures: this.#strikes },
      'this Bot API server keeps failing rich messages; using HTML messages from now on',
    );
    return true;
  }
}
