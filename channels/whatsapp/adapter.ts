import type { Logger } from 'pino';
import type { Button, ChannelAdapter, ChannelCapabilities, Deliver, TransportOptions } from '../../src/contracts/channel.js';
import { CodedError } from '../../src/contracts/errors.js';
import type { HttpRoutes } from '../../src/contracts/http.js';
import type { Attachment, MessageRef, ReplyTarget } from '../../src/contracts/message.js';
import { untilAborted } from '../../src/util/abortable.js';
import { checkSize, fetchLimited } from '../../src/util/download.js';
import { platformCaller } from '../../src/util/platform-call.js';
import { VERSION } from '../../src/util/version.js';
import { classifyWhatsAppError } from './errors.js';
import { markdownToWhatsApp } from './format.js';
import { graphRequest } from './graph.js';
import { addressOf } from './ids.js';
import type { WaIdentity } from './normalize.js';
import { notifyHandler, verifyHandler } from './webhook.js';

export interface WhatsAppOptions {
  id: string;
  phoneNumberId: string;
  apiRoot: string;
  accessToken: string;
  appSecret: string;
  verifyToken: string;
  http: HttpRoutes;
  log: Logger;
}

/** WhatsApp's limit on a text message body. */
export const TEXT_MAX_CHARS = 4096;
/** An interactive message's body, and a reply button's title. */
const INTERACTIVE_BODY_MAX_CHARS = 1024;
const BUTTON_TITLE_MAX_CHARS = 20;
/** WhatsApp shows at most three reply buttons on a message. */
const MAX_BUTTONS = 3;

/**
 * Sent with media downloads: Meta's media URL answers a bare or generic User-Agent (Node's
 * fetch sends `node`) with an HTML page instead of the file.
 */
const MEDIA_USER_AGENT = `channeld/${VERSION}`;

const clip = (s: string, max: number) => (s.length <= max ? s : `${s.slice(0, max - 1)}…`);

/**
 * WhatsApp Cloud API over raw HTTP (Meta's Node SDK is archived; the API is a few JSON
 * calls). Messages cannot be edited, so replies go out in final-text mode with a typing
 * indicator while the model writes.
 */
export class WhatsAppAdapter implements ChannelAdapter {
  readonly capabilities: ChannelCapabilities = {
    maxMessageLength: TEXT_MAX_CHARS,
    editsDrafts: false,
    // No edits: this is the floor between the messages of one long reply. WhatsApp takes short
    // bursts; its per-user pair limit (131056) is a 429 the pacer then waits out.
    minEditIntervalMs: 250,
    nativeStream: false,
    typing: true,
    typingRefreshMs: 20_000, // an indicator lasts 25 s or until the answer arrives
  };
  readonly #o: WhatsAppOptions;
  readonly #call = platformCaller(classifyWhatsAppError);
  #me: WaIdentity;
  #name: string | undefined;

  constructor(options: WhatsAppOptions) {
    this.#o = options;
    this.#me = { phoneNumberId: options.phoneNumberId, number: undefined };
  }

  get id(): string {
    return this.#o.id;
  }
  get selfId(): string | undefined {
    return this.#me.number;
  }
  get selfName(): string | undefined {
    return this.#name;
  }

  #graph<T>(what: string, method: 'GET' | 'POST', path: string, body: unknown, signal: AbortSignal): Promise<T> {
    return this.#call(what, signal, (s) => graphRequest<T>({ apiRoot: this.#o.apiRoot, token: this.#o.accessToken }, method, path, body, s));
  }

  /** Checks the token against the phone number (a refusal parks the channel), then takes webhooks until stopped. */
  async listen(deliver: Deliver, signal: AbortSignal, onConnected: () => void): Promise<void> {
    const phone = await this.#graph<{ display_phone_number?: string; verified_name?: string }>(
      'phone number',
      'GET',
      `${this.#o.phoneNumberId}?fields=display_phone_number,verified_name`,
      undefined,
      signal,
    );
    this.#me = { phoneNumberId: this.#o.phoneNumberId, number: phone.display_phone_number?.replace(/\D/g, '') || undefined };
    this.#name = phone.verified_name;
    const path = `/webhooks/${this.#o.id}`;
    const o = { channelId: this.#o.id, appSecret: this.#o.appSecret, verifyToken: this.#o.verifyToken, me: () => this.#me, deliver, log: this.#o.log };
    const removes = [
      this.#o.http.route('GET', path, verifyHandler(o), {
        scheme: 'verify-token',
        describe: 'hub.verify_token equals verify_token before hub.challenge is echoed',
      }),
      this.#o.http.route('POST', path, notifyHandler(o), { scheme: 'hmac-sha256', describe: 'X-Hub-Signature-256 over the raw body with app_secret' }),
    ];
    try {
      onConnected();
      await untilAborted(signal);
    } finally {
      for (const remove of removes) remove();
    }
  }

  #messages(what: string, body: Record<string, unknown>, signal: AbortSignal) {
    return this.#graph<{ messages?: Array<{ id?: string }> }>(
      what,
      'POST',
      `${this.#o.phoneNumberId}/messages`,
      { messaging_product: 'whatsapp', ...body },
      signal,
    );
  }

  /**
   * A text message, or reply buttons (approvals), in reply to the user's message. A chat named
   * by a business-scoped user id (its user's phone number withheld) is addressed by `recipient`.
   */
  async send(target: ReplyTarget, text: string, options: TransportOptions): Promise<MessageRef> {
    const body = markdownToWhatsApp(text);
    const content = options.buttons?.length ? this.#interactive(body, options.buttons) : { type: 'text', text: { body, preview_url: false } };
    const r = await this.#messages(
      'send',
      {
        ...addressOf(target.chatId, target.chatType),
        ...(target.replyToMessageId ? { context: { message_id: target.replyToMessageId } } : {}),
        ...content,
      },
      options.signal,
    );
    const id = r.messages?.[0]?.id;
    if (!id) throw classifyWhatsAppError(new Error('the send was answered without a message id'), 'send');
    return { chatId: target.chatId, messageId: id };
  }

  /** Up to three reply buttons; a click comes back as a message whose button id is the command. */
  #interactive(body: string, buttons: readonly Button[]) {
    return {
      type: 'interactive',
      interactive: {
        type: 'button',
        body: { text: clip(body, INTERACTIVE_BODY_MAX_CHARS) },
        action: { buttons: buttons.slice(0, MAX_BUTTONS).map((b) => ({ type: 'reply', reply: { id: b.data, title: clip(b.label, BUTTON_TITLE_MAX_CHARS) } })) },
      },
    };
  }

  /**
   * WhatsApp cannot edit a sent message. Replies never ask (no drafts); what can still ask is a
   * re-run after a crash, whose messages stand as sent, and an approval's outcome, which the
   * answer after it shows. Resolving keeps both from sending the text a second time.
   */
  async edit(ref: MessageRef): Promise<void> {
    this.#o.log.debug({ channel: this.#o.id, message: ref.messageId }, 'WhatsApp cannot edit messages; the sent one stays');
  }

  /** Nor can the Cloud API delete a sent message: it stays. */
  async delete(ref: MessageRef): Promise<void> {
    this.#o.log.debug({ channel: this.#o.id, message: ref.messageId }, 'WhatsApp cannot delete messages; the sent one stays');
  }

  /** Marks the user's message read and shows "typing…" (the Cloud API ties the indicator to a message). */
  async typing(target: ReplyTarget, options: TransportOptions): Promise<void> {
    if (!target.replyToMessageId) return;
    await this.#messages('typing', { status: 'read', message_id: target.replyToMessageId, typing_indicator: { type: 'text' } }, options.signal);
  }

  /** Media id → media URL (with its size, checked first) → the bytes, fetched with the token and our User-Agent. */
  async download(a: Attachment, o: { maxBytes: number; signal: AbortSignal }): Promise<Buffer> {
    const name = a.name ?? a.type;
    checkSize(name, a.size, o.maxBytes);
    const media = await this.#graph<{ url?: string; file_size?: number }>(
      'media',
      'GET',
      `${encodeURIComponent(a.id)}?phone_number_id=${this.#o.phoneNumberId}`,
      undefined,
      o.signal,
    );
    checkSize(name, typeof media.file_size === 'number' ? media.file_size : undefined, o.maxBytes);
    if (!media.url) throw new CodedError('ATTACHMENT_UNAVAILABLE', `WhatsApp gave no media URL for ${name}`);
    return fetchLimited(media.url, {
      maxBytes: o.maxBytes,
      signal: o.signal,
      name,
      headers: { authorization: `Bearer ${this.#o.accessToken}`, 'user-agent': MEDIA_USER_AGENT },
      // An HTML page for a file that is not HTML is Meta refusing the download (a bad token or
      // User-Agent): ATTACHMENT_UNAVAILABLE, not a web page handed to the model as the image.
      htmlMeansRefused: !a.mime?.includes('html'),
    });
  }
}
