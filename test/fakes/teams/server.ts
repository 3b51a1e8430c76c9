import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { FakeHttpServer } from '../http-fake.js';
import { FakeStreams, STREAM_CANCELLED_BY_USER, type StreamUpdate } from './streams.js';

export { INFORMATIVE_AFTER_STREAMING, INFORMATIVE_MAX_BYTES, INFORMATIVE_MAX_CHARS, STREAM_CANCELLED_BY_USER, STREAM_NOT_CONTINUED } from './streams.js';

/** A fault for the next call of an endpoint: a status (429 with Retry-After), or a dropped connection. */
export type TeamsFault = { status: 429; retryAfterS: number } | { status: 400 | 401 | 403 | 412 | 500 | 502 | 504; code?: string } | { drop: true };

/** A call the fake holds unanswered (`FakeTeams.hold`); once it came it is in `calls`, its body taken as Teams would have it. */
export interface HeldCall {
  /** Lets it go: it is answered as any call, and takes effect even if its client gave up on it meanwhile. */
  release(): void;
}

type Queued = TeamsFault | { held: Promise<void> };

export interface TeamsCall {
  /** openid, keys, token, send, reply, update, delete, typing, stream. */
  name: string;
  path: string;
  body: any;
  auth: string | undefined;
  at: number;
}

/** A message the bot posted, as Teams shows it now. */
export interface BotActivity {
  conversationId: string;
  id: string;
  text: string;
  replyToId?: string;
  attachments?: any[];
  updates: number;
  deleted: boolean;
  /** Posted as a stream (its id is the stream id). */
  streamed: boolean;
  /** A stream still open: shown with the text so far, until its final message, an update, or Teams' time limit. */
  streaming?: boolean;
  /** The user pressed Stop on the stream: it keeps the text it showed, and Teams refuses any change to it. */
  stoppedByUser?: boolean;
  /** The informative update shown while no text has streamed yet (the streamed text or the final replaces it). */
  informative?: string;
}

export const APP_ID = '11111111-2222-3333-4444-555555555555';
const ISSUER = 'https://api.botframework.com';
const BOT_ID = `28:${APP_ID}`;
/** The tenant the fake's conversations belong to. */
export const TENANT = '66666666-7777-8888-9999-000000000000';

/**
 * The Bot Framework as a bot meets it, on 127.0.0.1: the OpenID metadata and its JWKS (a
 * test key pair), the token endpoint (client credentials), and the Connector REST API
 * (send, reply, update, delete, typing, and Teams' streaming protocol). It signs the
 * activities it posts to the bot like the Connector does; faults are queued per endpoint.
 */
export class FakeTeams {
  readonly appId = APP_ID;
  readonly password = 'app-password-secret';
  readonly calls: TeamsCall[] = [];
  readonly activities: BotActivity[] = [];
  /** Inline images users pasted, served at `<serviceUrl>v3/attachments/<id>/views/original` to the bot's token. */
  readonly files = new Map<string, { bytes: Buffer; mime: string }>();
  /** Stream updates Teams took (typing activities with streaminfo: `streaming` text or `informative`), in order; not the final. */
  readonly streamUpdates: StreamUpdate[] = [];
  url = '';
  /** Where the daemon takes activities (set by the test once it runs). */
  webhook = '';
  /** Refuse streaming (as Teams does outside 1:1 chats, or where it is not rolled out). */
  refuseStreams = false;
  /** Teams' strict limit on one stream: chunks and the final past it get 403 "exceeded streaming time". */
  streamLimitMs = 120_000;
  /**
   * Refuse an update (PUT) of a message whose stream is still open. Teams does not document
   * it either way (its SDKs update a streamed message in place after the time limit only),
   * so tests run both; accepted, the update ends the stream.
   */
  refuseUpdatesWhileStreaming = false;
  /**
   * The channels the published key may sign for (its `endorsements`); undefined publishes it
   * without any. Set before the first activity: the bot caches the keys.
   */
  endorsements: string[] | undefined = ['msteams'];
  readonly #streams = new FakeStreams({
    activities: this.activities,
    updates: this.streamUpdates,
    limitMs: () => this.streamLimitMs,
    newId: () => `stream-${this.#nextId++}`,
  });
  #key!: CryptoKey;
  #jwk!: JWK;
  /** A key pair the JWKS does not publish: tokens it signs must be refused. */
  #strangerKey!: CryptoKey;
  #issued = new Set<string>();
  #nextId = 1;
  readonly #faults = new Map<string, Queued[]>();
  readonly #held = new Set<HeldCall>();
  readonly #http = new FakeHttpServer((req, res) => this.#handle(req, res));

  async start(): Promise<string> {
    const pair = await generateKeyPair('RS256', { extractable: true });
    this.#key = pair.privateKey;
    this.#jwk = { ...(await exportJWK(pair.publicKey)), kid: 'test-key-1', use: 'sig', alg: 'RS256' };
    this.#strangerKey = (await generateKeyPair('RS256')).privateKey;
    this.url = await this.#http.listen();
    return this.url;
  }

  async close(): Promise<void> {
    for (const h of this.#held) h.release();
    await this.#http.close();
  }

  get openIdUrl(): string {
    return `${this.url}/openid`;
  }
  get tokenUrl(): string {
    return `${this.url}/token`;
  }
  /** The serviceUrl activities carry: the Connector is this fake. */
  get serviceUrl(): string {
    return `${this.url}/teams/`;
  }

  fail(name: string, fault: TeamsFault, times = 1): void {
    const list = this.#faults.get(name) ?? [];
    for (let i = 0; i < times; i++) list.push(fault);
    this.#faults.set(name, list);
  }

  /** Holds the next call of an endpoint (after the faults queued before it) until the test releases it (or the fake closes). */
  hold(name: string): HeldCall {
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const held: HeldCall = { release };
    this.#held.add(held);
    const list = this.#faults.get(name) ?? [];
    list.push({ held: released });
    this.#faults.set(name, list);
    return held;
  }

  callsOf(name: string): TeamsCall[] {
    return this.calls.filter((c) => c.name === name);
  }

  /** Texts of the bot's live messages in a conversation, in order. */
  texts(conversationId: string): string[] {
    return this.activities.filter((a) => a.conversationId === conversationId && !a.deleted).map((a) => a.text);
  }

  // ——— the Connector calling the bot ———

  /** A Connector token: signed by the published key unless told otherwise, with claims overridable; `kid: null` names no key. */
  async token(o: { claims?: Record<string, unknown>; expiresInS?: number; stranger?: boolean; kid?: string | null } = {}): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ serviceurl: this.serviceUrl, ...o.claims })
      .setProtectedHeader({ alg: 'RS256', ...(o.kid === null ? {} : { kid: o.kid ?? 'test-key-1' }), typ: 'JWT' })
      .setIssuer((o.claims?.iss as string | undefined) ?? ISSUER)
      .setAudience((o.claims?.aud as string | undefined) ?? this.appId)
      .setIssuedAt(now - 10)
      .setNotBefore(now - 10)
      .setExpirationTime(now + (o.expiresInS ?? 3600))
      .sign(o.stranger ? this.#strangerKey : this.#key);
  }

  /** A message activity from a user; `kind` picks the conversation. */
  activity(
    text: string,
    o: { kind?: 'personal' | 'groupChat' | 'channel'; mention?: boolean; from?: { id: string; aadObjectId: string; name: string }; value?: unknown } = {},
  ) {
    const kind = o.kind ?? 'personal';
    const from = o.from ?? { id: '29:user-ada', aadObjectId: 'aad-ada-0001', name: 'Ada' };
    const conversation =
      kind === 'personal'
        ? { id: 'a:1personal-ada', conversationType: 'personal', tenantId: TENANT }
        : kind === 'groupChat'
          ? { id: '19:group@thread.v2', conversationType: 'groupChat', tenantId: TENANT }
          : { id: '19:channel@thread.tacv2;messageid=1700000000000', conversationType: 'channel', tenantId: TENANT };
    const mentionText = o.mention ? `<at>Channeld</at> ${text}` : text;
    return {
      type: 'message',
      id: `${Date.now()}${this.#nextId++}`,
      timestamp: new Date().toISOString(),
      serviceUrl: this.serviceUrl,
      channelId: 'msteams',
      from,
      conversation,
      recipient: { id: BOT_ID, name: 'Channeld' },
      text: mentionText,
      textFormat: 'plain',
      ...(o.value ? { value: o.value } : {}),
      entities: o.mention ? [{ type: 'mention', text: '<at>Channeld</at>', mentioned: { id: BOT_ID, name: 'Channeld' } }] : [],
      channelData: { tenant: { id: TENANT } },
    };
  }

  /** A 1:1 message with an inline image, its bytes served by the fake's Connector. */
  imageActivity(text: string, bytes: Buffer, mime = 'image/jpeg') {
    const id = `att${this.#nextId++}`;
    this.files.set(id, { bytes, mime });
    return {
      ...this.activity(text),
      attachments: [{ contentType: mime, contentUrl: `${this.serviceUrl}v3/attachments/${id}/views/original`, name: 'photo.jpg' }],
    };
  }

  /** Posts an activity to the daemon as the Connector would (signed); returns the HTTP status. */
  async post(activity: unknown, token?: string | null): Promise<number> {
    const auth = token === null ? undefined : `Bearer ${token ?? (await this.token())}`;
    const res = await fetch(this.webhook, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(auth ? { authorization: auth } : {}) },
      body: JSON.stringify(activity),
    });
    await res.body?.cancel();
    return res.status;
  }

  /** A user clicks a card button on one of the bot's messages (Action.Submit: a message activity with `value`). */
  async click(
    message: BotActivity,
    title: string,
    from?: { id: string; aadObjectId: string; name: string },
    kind: 'personal' | 'groupChat' | 'channel' = 'personal',
  ): Promise<number> {
    const action = message.attachments?.[0]?.content?.actions?.find((a: { title: string }) => a.title === title);
    if (!action) throw new Error(`no button "${title}"`);
    const a = { ...this.activity('', { kind, ...(from ? { from } : {}), value: action.data }), replyToId: message.id };
    delete (a as { text?: string }).text;
    return this.post(a);
  }

  /**
   * The user presses Teams' Stop button on the conversation's open stream. Teams tells the bot
   * nothing then; its next request on that stream gets 403 ContentStreamNotAllowed "Content
   * stream was cancelled by user.", and the text shown so far stays. Returns the stopped message.
   */
  pressStop(conversationId: string): BotActivity {
    const a = this.activities.find((x) => x.conversationId === conversationId && x.streaming);
    if (!a) throw new Error(`no open stream in ${conversationId}`);
    a.streaming = false;
    a.stoppedByUser = true;
    return a;
  }

  // ——— the bot calling Teams ———

  #json(res: ServerResponse, status: number, body: unknown): void {
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x');
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    const isForm = (req.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded');
    let body: any;
    try {
      body = raw ? (isForm ? Object.fromEntries(new URLSearchParams(raw)) : JSON.parse(raw)) : undefined;
    } catch {
      return this.#json(res, 400, { error: { code: 'BadArgument', message: 'not JSON' } });
    }
    const name = endpointName(req.method ?? 'GET', url.pathname, body);
    this.calls.push({ name, path: url.pathname, body, auth: req.headers.authorization, at: Date.now() });
    let fault = this.#faults.get(name)?.shift();
    if (fault && 'held' in fault) {
      await fault.held;
      fault = undefined;
    }
    if (fault && 'drop' in fault) return void req.socket.destroy();
    if (fault && fault.status === 429) {
      res
        .writeHead(429, { 'content-type': 'application/json', 'retry-after': String(fault.retryAfterS) })
        .end(JSON.stringify({ error: { code: 'Throttled', message: 'Too many requests' } }));
      return;
    }
    if (fault)
      return this.#json(res, fault.status, { error: { code: 'code' in fault && fault.code ? fault.code : 'ServiceError', message: 'injected fault' } });
    if (name === 'openid')
      return this.#json(res, 200, {
        issuer: ISSUER,
        authorization_endpoint: 'https://invalid.botframework.com',
        jwks_uri: `${this.url}/keys`,
        id_token_signing_alg_values_supported: ['RS256'],
        token_endpoint_auth_methods_supported: ['private_key_jwt'],
      });
    if (name === 'keys') return this.#json(res, 200, { keys: [{ ...this.#jwk, ...(this.endorsements ? { endorsements: this.endorsements } : {}) }] });
    if (name === 'token') {
      if (body?.grant_type !== 'client_credentials' || body.client_id !== this.appId || body.client_secret !== this.password)
        return this.#json(res, 401, { error: 'invalid_client', error_description: 'AADSTS7000215: Invalid client secret provided.' });
      if (body.scope !== 'https://api.botframework.com/.default') return this.#json(res, 400, { error: 'invalid_scope' });
      const token = `bot-token-${randomUUID()}`;
      this.#issued.add(token);
      return this.#json(res, 200, { token_type: 'Bearer', expires_in: 3599, ext_expires_in: 3599, access_token: token });
    }
    const auth = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (!auth || !this.#issued.has(auth)) return this.#json(res, 401, { message: 'Authorization has been denied for this request.' });
    if (name === 'attachment') {
      const f = this.files.get(decodeURIComponent(url.pathname.split('/')[4]!));
      if (!f) return this.#json(res, 404, { error: { code: 'NotFound', message: 'no such attachment' } });
      res.writeHead(200, { 'content-type': f.mime, 'content-length': f.bytes.length }).end(f.bytes);
      return;
    }
    const m = /^\/teams\/v3\/conversations\/([^/]+)\/activities(?:\/([^/]+))?$/.exec(url.pathname);
    if (!m) return this.#json(res, 404, { error: { code: 'NotFound', message: 'no such endpoint' } });
    const conversationId = decodeURIComponent(m[1]!);
    const activityId = m[2] ? decodeURIComponent(m[2]) : undefined;
    switch (name) {
      case 'typing':
        return this.#json(res, 200, {});
      case 'stream': {
        if (this.refuseStreams || !conversationId.startsWith('a:')) return this.#streamRefused(res, 'Content stream is not allowed');
        const [status, answer] = this.#streams.take(conversationId, body);
        return this.#json(res, status, answer);
      }
      case 'send':
      case 'reply': {
        const id = `${this.#nextId++}`;
        this.activities.push({
          conversationId,
          id,
          text: body.text,
          ...(activityId ? { replyToId: activityId } : {}),
          ...(body.attachments ? { attachments: body.attachments } : {}),
          updates: 0,
          deleted: false,
          streamed: false,
        });
        return this.#json(res, 201, { id });
      }
      case 'update': {
        const a = this.activities.find((x) => x.conversationId === conversationId && x.id === activityId);
        if (!a) return this.#json(res, 404, { error: { code: 'ActivityNotFoundInConversation', message: 'not found' } });
        // "Bots can't change the content already streamed" once the user stopped it (the answer to a PUT is not documented).
        if (a.stoppedByUser) return this.#streamRefused(res, STREAM_CANCELLED_BY_USER);
        if (a.streaming && this.refuseUpdatesWhileStreaming) return this.#streamRefused(res, 'Content stream is not allowed');
        a.streaming = false;
        a.text = body.text;
        if (body.attachments) a.attachments = body.attachments.length ? body.attachments : undefined;
        a.updates++;
        return this.#json(res, 200, { id: activityId });
      }
      case 'delete': {
        const a = this.activities.find((x) => x.conversationId === conversationId && x.id === activityId);
        if (a) a.deleted = true;
        return this.#json(res, 200, {});
      }
      default:
        return this.#json(res, 404, { error: { code: 'NotFound', message: 'no such endpoint' } });
    }
  }

  #streamRefused(res: ServerResponse, message: string): void {
    this.#json(res, 403, { error: { code: 'ContentStreamNotAllowed', message } });
  }
}

function endpointName(method: string, path: string, body: any): string {
  if (path === '/openid') return 'openid';
  if (path === '/keys') return 'keys';
  if (path === '/token') return 'token';
  if (method === 'GET' && /^\/teams\/v3\/attachments\/[^/]+\/views\/original$/.test(path)) return 'attachment';
  if (!path.startsWith('/teams/v3/conversations/')) return 'unknown';
  if (method === 'PUT') return 'update';
  if (method === 'DELETE') return 'delete';
  if (Array.isArray(body?.entities) && body.entities.some((e: { type?: string }) => e?.type === 'streaminfo')) return 'stream';
  if (body?.type === 'typing') return 'typing';
  return /\/activities\/[^/]+$/.test(path) ? 'reply' : 'send';
}
