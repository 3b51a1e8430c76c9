import { createHmac, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  BSUID,
  contactEntry,
  contactsContent,
  DEFAULT_USER,
  incoming,
  locationContent,
  unsupportedContent,
  userIdChangedContent,
  type WaFrom,
  type WaSenderContact,
} from './inbound.js';

/**
 * A request's next answer: a Graph error (`code`, e.g. 131047 or 190, with its HTTP status),
 * a 429 with Retry-After, a server error, a dropped connection (the socket is destroyed
 * before the request is processed), or a 200 HTML page (what Meta's media URL answers a
 * download it refuses, e.g. one without a proper User-Agent).
 */
export type WhatsAppFault =
  | { status: number; code: number; message?: string }
  | { status: 429; retryAfter: number }
  | { status: 500 | 503 }
  | { drop: true }
  | { html: true };

/** What a route is called in `fail()` and `callsOf()`: `messages`, `typing`, `phone`, `media`, `download`. */
export type WhatsAppRoute = 'messages' | 'typing' | 'phone' | 'media' | 'download';

export interface WaSent {
  id: string;
  /** Whom it went to: a phone number or group id (`to`), or a business-scoped user id (`recipient`). */
  to: string;
  /** The field that named them. */
  via: 'to' | 'recipient';
  recipientType: string;
  type: string;
  /** The text body, or an interactive message's body text. */
  text: string;
  contextId?: string;
  buttons?: Array<{ id: string; title: string }>;
}

export interface WaCall {
  route: WhatsAppRoute;
  body: Record<string, unknown> | undefined;
  at: number;
  userAgent: string | undefined;
}

const VERSION = 'v23.0';
/** Meta's answer to a media download it will not serve: a web page, with status 200. */
const REFUSAL_PAGE = '<!DOCTYPE html><html><head><title>Error</title></head><body>Sorry, something went wrong.</body></html>';

/**
 * The WhatsApp Cloud API on 127.0.0.1, as far as channeld uses it: the Graph API's phone
 * number, messages (text, interactive reply buttons, read + typing indicator) and media
 * endpoints behind a bearer token, with Graph error objects; and Meta's side of the
 * webhook: it signs each notification with the app secret (X-Hub-Signature-256) and posts
 * it to the daemon, delivering it again while the answer is not 200.
 */
export class FakeWhatsApp {
  readonly calls: WaCall[] = [];
  readonly sent: WaSent[] = [];
  /**
   * Sends the Cloud API accepted and never delivered: a business-scoped user id in `to`, which
   * it reads as a phone number (it answers with a message id all the same; see #send).
   */
  readonly lost: WaSent[] = [];
  /** Media the fake serves, by media id. */
  readonly media = new Map<string, { bytes: Buffer; mime: string }>();
  /** Media downloads, with the Authorization they carried. */
  readonly downloads: Array<{ id: string; authorization: string | undefined }> = [];
  url = '';
  /** The daemon's webhook URL (`<daemon>/webhooks/<id>`), set once the daemon listens. */
  webhookUrl = '';
  readonly phoneNumberId = '106540352242922';
  readonly displayNumber = '+1 555 010 0999';
  readonly number = '15550100999';
  readonly token = `EAAG${randomBytes(12).toString('hex')}`;
  readonly appSecret = randomBytes(16).toString('hex');
  readonly verifyToken = 'verify-me-123';
  readonly #faults = new Map<WhatsAppRoute, WhatsAppFault[]>();
  readonly #http: Server;
  #seq = 0;

  constructor() {
    this.#http = createServer((req, res) => void this.#handle(req, res));
  }

  async start(): Promise<string> {
    await new Promise<void>((r) => this.#http.listen(0, '127.0.0.1', () => r()));
    this.url = `http://127.0.0.1:${(this.#http.address() as AddressInfo).port}`;
    return this.url;
  }

  /** The `api_root` to configure: the Graph API with its version. */
  get apiRoot(): string {
    return `${this.url}/${VERSION}`;
  }

  async close(): Promise<void> {
    this.#http.closeAllConnections();
    await new Promise<void>((r) => this.#http.close(() => r()));
  }

  fail(route: WhatsAppRoute, fault: WhatsAppFault, times = 1): void {
    this.#faults.set(route, [...(this.#faults.get(route) ?? []), ...Array<WhatsAppFault>(times).fill(fault)]);
  }

  callsOf(route: WhatsAppRoute): WaCall[] {
    return this.calls.filter((c) => c.route === route);
  }

  /** The texts sent to a chat (a wa_id, a business-scoped user id or a group id), in order. */
  texts(to: string): string[] {
    return this.sent.filter((m) => m.to === to).map((m) => m.text);
  }

  #answer(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
    res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
  }

  #graphError(res: ServerResponse, status: number, code: number, message: string, headers: Record<string, string> = {}): void {
    this.#answer(res, status, { error: { message, type: code === 190 ? 'OAuthException' : 'GraphMethodException', code, fbtrace_id: 'Afake' } }, headers);
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', this.url);
    const parts = url.pathname.split('/').filter(Boolean);
    let raw = '';
    for await (const chunk of req) raw += String(chunk);
    let body: Record<string, unknown> | undefined;
    try {
      body = raw ? (JSON.parse(raw) as Record<string, unknown>) : undefined;
    } catch {
      return this.#graphError(res, 400, 100, 'Invalid JSON');
    }
    const route: WhatsAppRoute | undefined =
      parts[0] === 'download'
        ? 'download'
        : parts[0] !== VERSION
          ? undefined
          : parts[2] === 'messages' && req.method === 'POST'
            ? body?.status === 'read'
              ? 'typing'
              : 'messages'
            : parts.length === 2 && req.method === 'GET'
              ? parts[1] === this.phoneNumberId
                ? 'phone'
                : 'media'
              : undefined;
    if (!route) return this.#graphError(res, 404, 803, `Unknown path ${url.pathname}`);
    if (req.headers.authorization !== `Bearer ${this.token}`) return this.#graphError(res, 401, 190, 'Invalid OAuth access token - Cannot parse access token');
    this.calls.push({ route, body, at: Date.now(), userAgent: req.headers['user-agent'] });
    const fault = this.#faults.get(route)?.shift();
    if (fault) {
      if ('drop' in fault) return void req.socket.destroy();
      if ('html' in fault) return void res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(REFUSAL_PAGE);
      if ('retryAfter' in fault) return this.#graphError(res, 429, 130429, 'Rate limit hit', { 'retry-after': String(fault.retryAfter) });
      if ('code' in fault) return this.#graphError(res, fault.status, fault.code, fault.message ?? `error ${fault.code}`);
      return this.#graphError(res, fault.status, 131000, 'Something went wrong');
    }
    switch (route) {
      case 'phone':
        return this.#answer(res, 200, { display_phone_number: this.displayNumber, verified_name: 'Fake Bot', id: this.phoneNumberId });
      case 'typing':
        return this.#answer(res, 200, { success: true });
      case 'messages':
        this.#send(res, body ?? {});
        return;
      case 'media': {
        const m = this.media.get(parts[1]!);
        if (!m) return this.#graphError(res, 404, 100, 'Unsupported get request');
        return this.#answer(res, 200, {
          messaging_product: 'whatsapp',
          url: `${this.url}/download/${parts[1]}`,
          mime_type: m.mime,
          sha256: 'x',
          file_size: m.bytes.length,
          id: parts[1],
        });
      }
      case 'download': {
        this.downloads.push({ id: parts[1]!, authorization: req.headers.authorization });
        const m = this.media.get(parts[1]!)!;
        res.writeHead(200, { 'content-type': m.mime, 'content-length': m.bytes.length }).end(m.bytes);
        return;
      }
    }
  }

  /** POST /{phone_number_id}/messages: validates what the Cloud API checks that we rely on. */
  /** A Graph error for #send; false: nothing was sent. */
  #refuse(res: ServerResponse, status: number, code: number, message: string): boolean {
    this.#graphError(res, status, code, message);
    return false;
  }

  /**
   * Addressing as Meta's send API takes it: `to` a phone number or group id, `recipient` a
   * business-scoped user id (or a parent one); with both, `to` wins. `recipient_type` is
   * `individual` or `group` (anything else is error 100), and a group is named by `to`.
   * A BSUID in `to` is accepted with a message id and never delivered: the API reads it as a
   * phone number (reported in chatwoot/chatwoot#15150), so such a send lands in `lost`.
   */
  #address(res: ServerResponse, b: Record<string, unknown>): { to: string; via: WaSent['via']; lost: boolean } | undefined {
    const type = b.recipient_type;
    if (type !== undefined && type !== 'individual' && type !== 'group') {
      this.#refuse(res, 400, 100, '(#100) Param recipient_type must be one of {individual, group}');
      return undefined;
    }
    if (typeof b.to === 'string' && b.to) return { to: b.to, via: 'to', lost: BSUID.test(b.to) };
    if (b.to !== undefined) {
      this.#refuse(res, 400, 100, '(#100) Param to must be a non-empty string');
      return undefined;
    }
    if (b.recipient === undefined) {
      this.#refuse(res, 400, 100, '(#100) The parameter to or recipient is required');
      return undefined;
    }
    if (typeof b.recipient !== 'string' || !BSUID.test(b.recipient) || type === 'group') {
      this.#refuse(res, 400, 100, '(#100) Param recipient must be a business-scoped user id of an individual');
      return undefined;
    }
    return { to: b.recipient, via: 'recipient', lost: false };
  }

  #send(res: ServerResponse, b: Record<string, unknown>): boolean {
    if (b.messaging_product !== 'whatsapp') return this.#refuse(res, 400, 100, 'messaging_product must be "whatsapp"');
    const address = this.#address(res, b);
    if (!address) return false;
    const { to, via } = address;
    const context = (b.context as { message_id?: string } | undefined)?.message_id;
    let text: string;
    let buttons: WaSent['buttons'];
    if (b.type === 'text') {
      text = String((b.text as { body?: unknown } | undefined)?.body ?? '');
      if (!text || text.length > 4096) return this.#refuse(res, 400, 100, `text.body must be 1 to 4096 characters, got ${text.length}`);
    } else if (b.type === 'interactive') {
      const i = b.interactive as {
        type?: string;
        body?: { text?: string };
        action?: { buttons?: Array<{ type?: string; reply?: { id?: string; title?: string } }> };
      };
      text = i.body?.text ?? '';
      const bs = i.action?.buttons ?? [];
      if (i.type !== 'button' || !text || text.length > 1024 || bs.length < 1 || bs.length > 3)
        return this.#refuse(res, 400, 131009, 'Parameter value is not valid');
      if (bs.some((x) => x.type !== 'reply' || !x.reply?.id || x.reply.id.length > 256 || !x.reply.title || x.reply.title.length > 20))
        return this.#refuse(res, 400, 131009, 'Parameter value is not valid');
      buttons = bs.map((x) => ({ id: x.reply!.id!, title: x.reply!.title! }));
    } else return this.#refuse(res, 400, 100, `unsupported type ${String(b.type)}`);
    const id = `wamid.OUT${++this.#seq}`;
    (address.lost ? this.lost : this.sent).push({
      id,
      to,
      via,
      recipientType: String(b.recipient_type ?? 'individual'),
      type: String(b.type),
      text,
      ...(context ? { contextId: context } : {}),
      ...(buttons ? { buttons } : {}),
    });
    // The answer names the user as the send did: wa_id for a number, user_id for a BSUID.
    const contact = via === 'to' ? { input: to, wa_id: to } : { input: to, user_id: to };
    this.#answer(res, 200, { messaging_product: 'whatsapp', contacts: [contact], messages: [{ id }] });
    return true;
  }

  // ---- Meta's side of the webhook ----

  /** A `messages` webhook notification for this phone number (or another of the app) carrying `value`'s fields. */
  #envelope(value: Record<string, unknown>, phoneNumberId = this.phoneNumberId): Record<string, unknown> {
    const metadata = { display_phone_number: this.number, phone_number_id: phoneNumberId };
    return {
      object: 'whatsapp_business_account',
      entry: [{ id: 'WABA1', changes: [{ field: 'messages', value: { messaging_product: 'whatsapp', metadata, ...value } }] }],
    };
  }

  /**
   * A notification with `messages` (and the senders' contacts); `phoneNumberId` makes it one
   * for another number of the same app, which Meta posts to the same callback URL.
   */
  notification(messages: Array<Record<string, unknown>>, contacts: WaSenderContact[] = [], phoneNumberId = this.phoneNumberId): Record<string, unknown> {
    return this.#envelope({ contacts: contacts.map(contactEntry), messages }, phoneNumberId);
  }

  /** A notification carrying only WhatsApp's `errors` (value.errors), no message. */
  errorsNotification(errors: Array<{ code: number; title: string; details?: string }>): Record<string, unknown> {
    return this.#envelope({
      errors: errors.map((e) => ({ code: e.code, title: e.title, message: e.title, error_data: { details: e.details ?? e.title } })),
    });
  }

  /** A status notification (sent, delivered, read): not a message. */
  statusNotification(id: string, status: 'sent' | 'delivered' | 'read' | 'failed', error?: { code: number; title: string }): Record<string, unknown> {
    const errors = error ? { errors: [{ ...error, message: error.title, error_data: { details: `${error.title} (fake)` } }] } : {};
    return this.#envelope({ statuses: [{ id, status, timestamp: String(Math.floor(Date.now() / 1000)), recipient_id: DEFAULT_USER, ...errors }] });
  }

  /** An incoming text message (a DM unless `group` is given), from the default user unless `o` names another (WaFrom). */
  textMessage(text: string, o: WaFrom = {}): Record<string, unknown> {
    return incoming('text', { text: { body: text } }, o, this.number);
  }

  /** A shared location. */
  locationMessage(l: Parameters<typeof locationContent>[0], o: WaFrom = {}): Record<string, unknown> {
    return incoming('location', locationContent(l), o, this.number);
  }

  /** Shared contact cards. */
  contactsMessage(cards: Parameters<typeof contactsContent>[0], o: WaFrom = {}): Record<string, unknown> {
    return incoming('contacts', contactsContent(cards), o, this.number);
  }

  /** A message of a type the Cloud API does not pass on (`sentType`, e.g. a poll): `type: "unsupported"`. */
  unsupportedMessage(sentType: string, o: WaFrom = {}): Record<string, unknown> {
    return incoming('unsupported', unsupportedContent(sentType), o, this.number);
  }

  /** The system message saying a user's BSUID changed; no phone number is included. */
  userIdChangedMessage(previous: string, next: string): Record<string, unknown> {
    return incoming('system', userIdChangedContent(previous, next), { from: null, userId: next }, this.number);
  }

  /** A click on a reply button of a message we sent. */
  buttonReply(sent: WaSent, title: string, from = DEFAULT_USER): Record<string, unknown> {
    const b = sent.buttons!.find((x) => x.title === title)!;
    return {
      from,
      id: `wamid.IN${randomBytes(8).toString('hex')}`,
      timestamp: String(Math.floor(Date.now() / 1000)),
      type: 'interactive',
      context: { from: this.number, id: sent.id },
      interactive: { type: 'button_reply', button_reply: { id: b.id, title: b.title } },
    };
  }

  /** X-Hub-Signature-256 as Meta computes it: HMAC-SHA256 of the raw body with the app secret. */
  sign(raw: string, secret = this.appSecret): string {
    return `sha256=${createHmac('sha256', secret).update(raw).digest('hex')}`;
  }

  /** Posts one notification to the daemon, signed (or with the `signature` given, '' for none); returns the status. */
  async post(payload: unknown, signature?: string): Promise<number> {
    const raw = JSON.stringify(payload);
    const sig = signature ?? this.sign(raw);
    const res = await fetch(this.webhookUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(sig ? { 'x-hub-signature-256': sig } : {}) },
      body: raw,
    });
    await res.body?.cancel();
    return res.status;
  }

  /**
   * Meta's delivery: posts the notification and posts it again (with a short backoff) until it
   * is answered 200, `attempts` times at most. Returns the statuses seen.
   */
  async deliver(payload: unknown, attempts = 20): Promise<number[]> {
    const statuses: number[] = [];
    for (let i = 0; i < attempts; i++) {
      const status = await this.post(payload).catch(() => 0);
      statuses.push(status);
      if (status === 200) break;
      await new Promise((r) => setTimeout(r, 50 * (i + 1)));
    }
    return statuses;
  }
}
