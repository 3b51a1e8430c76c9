import type { IncomingMessage, ServerResponse } from 'node:http';
import { FakeHttpServer } from '../http-fake.js';

/** A fault for the next call of an endpoint: a status (429 with retry_after_ms and Retry-After), or a dropped connection. */
export type MatrixFault =
  | { status: 429; retryAfterMs: number }
  | { status: 401 | 403 | 404 | 500 | 502; errcode?: string }
  | { drop: true }
  /** The request is carried out, then the connection drops before the answer (the client cannot know it worked). */
  | { dropAnswer: true }
  /** The request is carried out as usual, `delayMs` after it came in: a slow homeserver, so that a client's requests overlap. */
  | { delayMs: number }
  /**
   * A /sync or /messages answer larger than any client reads (ANSWER_PADDING_BYTES more),
   * whatever its filter or limit asks: an account with more rooms or state than one answer can hold.
   */
  | { oversized: true };

export interface MatrixCall {
  /** The endpoint's name: whoami, versions, sync, messages, send, typing, redact, join, account_data, profile, media. */
  name: string;
  path: string;
  /** The query string's parameters (a /sync's since, timeout and filter; a /messages' dir, from, to, limit, filter). */
  query: Record<string, string>;
  body: any;
  at: number;
}

export interface BotMessage {
  roomId: string;
  eventId: string;
  txnId: string;
  /** The content as first sent. */
  content: Record<string, any>;
  /** The content shown now: the last edit's m.new_content, or the first. */
  shown: Record<string, any>;
  edits: number;
  redacted: boolean;
}

interface TimelineEntry {
  pos: number;
  roomId: string;
  event: Record<string, any>;
}

const SERVER = 'fake.test';
/** How much an `oversized` fault adds to a /sync answer: past the client's 8 MiB bound. */
const ANSWER_PADDING_BYTES = 9 * 1024 * 1024;
/** Synapse's timeline limit when a filter sets none. */
const DEFAULT_TIMELINE_LIMIT = 10;
/** Synapse's /messages page when `limit` is not given, and the most it serves (synapse/streams/config.py). */
const DEFAULT_MESSAGES_LIMIT = 10;
const MAX_MESSAGES_LIMIT = 1000;

/**
 * A Matrix homeserver's client-server API on 127.0.0.1, as much as a bot uses: whoami,
 * versions, profile, /sync (since tokens, long polling, invites, account data, a fresh
 * sync's history, an inline filter's timeline limit, `limited` timelines with `prev_batch`),
 * GET /rooms/{id}/messages (dir, from, to, limit, a filter's types, as Synapse pages), PUT send with transaction-id
 * deduplication, m.replace edits, redact, typing, join, account data and authenticated media. Errors are `{errcode, error}`;
 * faults are queued per endpoint; every call is logged.
 */
export class FakeMatrix {
  readonly token = 'syt_Ym90_faketoken_0001';
  readonly userId = `@bot:${SERVER}`;
  readonly alice = `@alice:${SERVER}`;
  readonly dmRoom = `!dm:${SERVER}`;
  readonly groupRoom = `!group:${SERVER}`;
  readonly displayName = 'Channeld Bot';
  readonly calls: MatrixCall[] = [];
  readonly botMessages: BotMessage[] = [];
  readonly typing: Array<{ roomId: string; typing: boolean }> = [];
  /** The bot's m.reaction annotations. */
  readonly reactions: Array<{ eventId: string; target: string; key: string; redacted: boolean }> = [];
  readonly media = new Map<string, { bytes: Buffer; mime: string }>();
  url = '';
  /** Serve v1.11 authenticated media; false: an older server with only /_matrix/media/v3. */
  authenticatedMedia = true;
  #pos = 0;
  readonly #timeline: TimelineEntry[] = [];
  readonly #joined = new Set<string>();
  /** Pending invites and the stream position each arrived at. */
  readonly #invites = new Map<string, { inviter: string; direct: boolean; pos: number }>();
  readonly #accountData = new Map<string, { pos: number; content: unknown }>();
  readonly #txns = new Map<string, string>();
  readonly #faults = new Map<string, MatrixFault[]>();
  #redeliver = false;
  /** The `since` of the last /sync asked for (the one before it is where a redelivery starts). */
  #lastSince = 0;
  #nextEvent = 1;
  readonly #waiters = new Set<() => void>();
  readonly #http = new FakeHttpServer((req, res) => this.#handle(req, res));

  constructor() {
    this.#joined.add(this.dmRoom).add(this.groupRoom);
    this.#accountData.set('m.direct', { pos: 0, content: { [this.alice]: [this.dmRoom] } });
  }

  async start(): Promise<string> {
    this.url = await this.#http.listen();
    return this.url;
  }

  async close(): Promise<void> {
    for (const w of this.#waiters) w();
    await this.#http.close();
  }

  /** The next `times` calls of endpoint `name` get `fault`. */
  fail(name: string, fault: MatrixFault, times = 1): void {
    const list = this.#faults.get(name) ?? [];
    for (let i = 0; i < times; i++) list.push(fault);
    this.#faults.set(name, list);
  }

  /** The next /sync answers again everything since the `since` of the one before (a redelivery). */
  redeliverNext(): void {
    this.#redeliver = true;
  }

  callsOf(name: string): MatrixCall[] {
    return this.calls.filter((c) => c.name === name);
  }

  /** The bot's messages in a room (not its edits), as shown now, in order. */
  messagesIn(roomId: string): BotMessage[] {
    return this.botMessages.filter((m) => m.roomId === roomId && !m.redacted && m.content['m.relates_to']?.rel_type !== 'm.replace');
  }

  /** The plain bodies the bot's messages in a room show now. */
  texts(roomId: string): string[] {
    return this.messagesIn(roomId).map((m) => m.shown.body as string);
  }

  /** Where the client's latest /sync starts: every event up to here was handled by it. */
  get syncedTo(): number {
    return this.#lastSince;
  }
  get position(): number {
    return this.#pos;
  }

  // ——— acting as users ———

  /** A user's event in a room (`sentAtMs`: its origin_server_ts, e.g. one from a federated server that was away); returns it as the timeline holds it. */
  post(roomId: string, content: Record<string, unknown>, sender = this.alice, type = 'm.room.message', sentAtMs = Date.now()): Record<string, any> {
    const event = { type, event_id: `$ev${this.#nextEvent++}:${SERVER}`, sender, origin_server_ts: sentAtMs, room_id: roomId, content };
    this.#append(roomId, event);
    return event;
  }

  /** Alice writes to the bot in their direct chat. */
  dm(text: string, sender = this.alice): Record<string, any> {
    return this.post(this.dmRoom, { msgtype: 'm.text', body: text }, sender);
  }

  /** A message in the group room; `mention` pings the bot the way current clients do (m.mentions and a pill). */
  group(text: string, o: { mention?: boolean; sender?: string; replyTo?: string; thread?: string } = {}): Record<string, any> {
    const body = o.mention ? `${this.displayName}: ${text}` : text;
    const content: Record<string, unknown> = { msgtype: 'm.text', body, 'm.mentions': o.mention ? { user_ids: [this.userId] } : {} };
    if (o.replyTo) content['m.relates_to'] = { 'm.in_reply_to': { event_id: o.replyTo } };
    if (o.thread) content['m.relates_to'] = { rel_type: 'm.thread', event_id: o.thread, is_falling_back: true, 'm.in_reply_to': { event_id: o.thread } };
    return this.post(this.groupRoom, content, o.sender ?? this.alice);
  }

  /**
   * An invite of the bot to `roomId` by `inviter`. As in Synapse, an incremental /sync lists it
   * once (in the batch after it arrived); a fresh sync lists every invite still pending.
   */
  invite(roomId: string, inviter: string, direct: boolean): void {
    this.#invites.set(roomId, { inviter, direct, pos: ++this.#pos });
    this.#wake();
  }

  /** The bot is a member of `roomId` too (a room it need not serve: it still fills /sync answers). */
  joinRoom(roomId: string): void {
    this.#joined.add(roomId);
  }

  joined(roomId: string): boolean {
    return this.#joined.has(roomId);
  }

  accountData(type: string): unknown {
    return this.#accountData.get(type)?.content;
  }

  /** An account that never had account data of `type` (a GET of it answers 404 M_NOT_FOUND); call before the client starts. */
  forgetAccountData(type: string): void {
    this.#accountData.delete(type);
  }

  /** Alice sends a file in the direct chat (uploaded to the fake's media store); `caption` per spec v1.10. */
  dmFile(bytes: Buffer, o: { name: string; mime: string; msgtype?: string; caption?: string }): Record<string, any> {
    const mediaId = `media${this.#nextEvent}`;
    this.media.set(mediaId, { bytes, mime: o.mime });
    return this.post(this.dmRoom, {
      msgtype: o.msgtype ?? 'm.image',
      body: o.caption ?? o.name,
      ...(o.caption ? { filename: o.name } : {}),
      url: `mxc://${SERVER}/${mediaId}`,
      info: { size: bytes.length, mimetype: o.mime },
    });
  }

  /** A joined room turned encrypted (its m.room.encryption state event). */
  encrypt(roomId: string): void {
    this.#joined.add(roomId);
    this.post(roomId, { algorithm: 'm.megolm.v1.aes-sha2' }, this.alice, 'm.room.encryption');
  }

  #append(roomId: string, event: Record<string, any>): void {
    this.#timeline.push({ pos: ++this.#pos, roomId, event });
    this.#wake();
  }

  #wake(): void {
    for (const w of [...this.#waiters]) w();
  }

  // ——— the API ———

  #error(res: ServerResponse, status: number, errcode: string, error: string, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}): void {
    res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify({ errcode, error, ...extra }));
  }

  #json(res: ServerResponse, body: unknown): void {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x');
    const path = url.pathname;
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    let body: any;
    try {
      body = raw ? JSON.parse(raw) : undefined;
    } catch {
      return this.#error(res, 400, 'M_NOT_JSON', 'Content not JSON.');
    }
    const name = endpointName(req.method ?? 'GET', path);
    this.calls.push({ name, path, query: Object.fromEntries(url.searchParams), body, at: Date.now() });
    if (name === 'versions') return this.#json(res, { versions: this.authenticatedMedia ? ['v1.10', 'v1.11', 'v1.12'] : ['r0.6.1', 'v1.1', 'v1.10'] });
    const fault = this.#faults.get(name)?.shift();
    if (fault && 'drop' in fault) return void req.socket.destroy();
    if (fault && 'delayMs' in fault) {
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          req.socket.off('close', done);
          resolve();
        };
        const timer = setTimeout(done, fault.delayMs);
        req.socket.once('close', done);
      });
      if (req.socket.destroyed) return;
    }
    if (fault && 'dropAnswer' in fault) {
      // Carried out as usual, but the answer is lost on the way.
      res.write = () => true;
      res.end = (() => {
        req.socket.destroy();
        return res;
      }) as typeof res.end;
    }
    if (fault && 'oversized' in fault) return name === 'messages' ? this.#messages(res, url, true) : this.#sync(req, res, url, true);
    if (fault && 'status' in fault && fault.status === 429)
      return this.#error(
        res,
        429,
        'M_LIMIT_EXCEEDED',
        'Too Many Requests',
        { retry_after_ms: fault.retryAfterMs },
        { 'retry-after': String(Math.ceil(fault.retryAfterMs / 1000)) },
      );
    if (fault && 'status' in fault)
      return this.#error(res, fault.status, fault.errcode ?? (fault.status >= 500 ? 'M_UNKNOWN' : 'M_FORBIDDEN'), 'injected fault');
    const auth = req.headers.authorization;
    if (!auth) return this.#error(res, 401, 'M_MISSING_TOKEN', 'Missing access token');
    if (auth !== `Bearer ${this.token}`) return this.#error(res, 401, 'M_UNKNOWN_TOKEN', 'Invalid access token passed.', { soft_logout: false });
    const seg = path.split('/').map(decodeURIComponent);
    switch (name) {
      case 'whoami':
        return this.#json(res, { user_id: this.userId, device_id: 'FAKEDEVICE' });
      case 'profile':
        return this.#json(res, { displayname: this.displayName });
      case 'account_data': {
        const type = seg[7]!;
        if (req.method === 'PUT') {
          this.#accountData.set(type, { pos: ++this.#pos, content: body });
          this.#wake();
          return this.#json(res, {});
        }
        const d = this.#accountData.get(type);
        return d ? this.#json(res, d.content) : this.#error(res, 404, 'M_NOT_FOUND', 'Account data not found');
      }
      case 'join': {
        const roomId = seg.at(-1)!;
        this.#invites.delete(roomId);
        this.#joined.add(roomId);
        return this.#json(res, { room_id: roomId });
      }
      case 'send':
        return this.#send(res, seg[5]!, seg[8]!, body);
      case 'react': {
        const eventId = `$react${this.#nextEvent++}:${SERVER}`;
        const rel = body?.['m.relates_to'];
        this.reactions.push({ eventId, target: rel?.event_id, key: rel?.key, redacted: false });
        return this.#json(res, { event_id: eventId });
      }
      case 'redact': {
        const m = this.botMessages.find((x) => x.eventId === seg[7]);
        if (m) m.redacted = true;
        const r = this.reactions.find((x) => x.eventId === seg[7]);
        if (r) r.redacted = true;
        return this.#json(res, { event_id: `$redaction${this.#nextEvent++}` });
      }
      case 'typing':
        this.typing.push({ roomId: seg[5]!, typing: body?.typing === true });
        return this.#json(res, {});
      case 'media': {
        if (!this.authenticatedMedia && path.startsWith('/_matrix/client/v1/')) return this.#error(res, 404, 'M_UNRECOGNIZED', 'Unrecognized request');
        const f = this.media.get(seg.at(-1)!);
        if (!f) return this.#error(res, 404, 'M_NOT_FOUND', 'Not found');
        res.writeHead(200, { 'content-type': f.mime, 'content-length': f.bytes.length }).end(f.bytes);
        return;
      }
      case 'sync':
        return this.#sync(req, res, url);
      case 'messages':
        return this.#messages(res, url);
      default:
        return this.#error(res, 404, 'M_UNRECOGNIZED', 'Unrecognized request');
    }
  }

  #send(res: ServerResponse, roomId: string, txnId: string, content: Record<string, any>): void {
    if (!this.#joined.has(roomId)) {
      this.#error(res, 403, 'M_FORBIDDEN', 'User not in room');
      return;
    }
    // The spec: a repeated transaction id (same access token) answers with the first event, posting nothing.
    const seen = this.#txns.get(txnId);
    if (seen) {
      this.#json(res, { event_id: seen });
      return;
    }
    const event = { type: 'm.room.message', event_id: `$bot${this.#nextEvent++}:${SERVER}`, sender: this.userId, origin_server_ts: Date.now(), content };
    this.#txns.set(txnId, event.event_id);
    const relates = content['m.relates_to'];
    if (relates?.rel_type === 'm.replace') {
      const target = this.botMessages.find((m) => m.eventId === relates.event_id);
      if (target) {
        target.shown = content['m.new_content'];
        target.edits++;
      }
    }
    this.botMessages.push({ roomId, eventId: event.event_id, txnId, content, shown: content, edits: 0, redacted: false });
    this.#append(roomId, event);
    this.#json(res, { event_id: event.event_id });
  }

  /** A filter given inline (JSON); a filter id (from POST /filter, which this fake lacks) is not read. */
  #timelineLimit(url: URL): number {
    const filter = url.searchParams.get('filter');
    if (!filter?.startsWith('{')) return DEFAULT_TIMELINE_LIMIT;
    const limit = JSON.parse(filter)?.room?.timeline?.limit;
    return Number.isInteger(limit) && limit > 0 ? limit : DEFAULT_TIMELINE_LIMIT;
  }

  async #sync(req: IncomingMessage, res: ServerResponse, url: URL, oversized = false): Promise<void> {
    const sinceParam = url.searchParams.get('since');
    let since = sinceParam ? Number(sinceParam.replace(/^s/, '')) : undefined;
    const previous = this.#lastSince;
    // Asked for from here on: everything before is in the client's hands (it asks only once it stored the last batch).
    this.#lastSince = since ?? 0;
    if (since !== undefined && this.#redeliver) {
      this.#redeliver = false;
      since = Math.min(since, previous);
    }
    const timeoutMs = Math.min(Number(url.searchParams.get('timeout') ?? 0), 60_000);
    const fresh = since === undefined;
    const pending = () =>
      this.#timeline.some((t) => t.pos > (since ?? 0) && this.#joined.has(t.roomId)) || [...this.#invites.values()].some((i) => i.pos > (since ?? 0));
    if (!fresh && !pending() && timeoutMs > 0) {
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          this.#waiters.delete(done);
          req.socket.off('close', done);
          resolve();
        };
        const timer = setTimeout(done, timeoutMs);
        this.#waiters.add(done);
        req.socket.once('close', done);
      });
    }
    if (res.destroyed || req.socket.destroyed) return;
    const join: Record<string, { timeline: { events: unknown[]; limited: boolean; prev_batch?: string }; state: { events: unknown[] } }> = {};
    const inRange = new Map<string, TimelineEntry[]>();
    for (const t of this.#timeline) {
      if (!this.#joined.has(t.roomId) || (!fresh && t.pos <= since!)) continue;
      const list = inRange.get(t.roomId);
      if (list) list.push(t);
      else inRange.set(t.roomId, [t]);
    }
    // Per room the latest `limit` events; more than that and the timeline is `limited`, with a
    // prev_batch token to paginate back from (GET /messages): the position just before the first.
    const limit = this.#timelineLimit(url);
    for (const [roomId, entries] of inRange) {
      const kept = entries.slice(-limit);
      const limited = kept.length < entries.length;
      join[roomId] = {
        timeline: { events: kept.map((t) => t.event), limited, ...(limited ? { prev_batch: `s${kept[0]!.pos - 1}` } : {}) },
        state: { events: [] },
      };
    }
    const invite: Record<string, unknown> = {};
    for (const [roomId, inv] of this.#invites) {
      if (!fresh && inv.pos <= since!) continue;
      invite[roomId] = {
        invite_state: {
          events: [
            { type: 'm.room.name', state_key: '', sender: inv.inviter, content: { name: 'invited room' } },
            {
              type: 'm.room.member',
              state_key: this.userId,
              sender: inv.inviter,
              content: { membership: 'invite', ...(inv.direct ? { is_direct: true } : {}) },
            },
          ],
        },
      };
    }
    const accountData = [...this.#accountData].filter(([, d]) => fresh || d.pos > since!).map(([type, d]) => ({ type, content: d.content }));
    // An unknown top-level key, which clients ignore: it only makes the answer too large to read.
    const padding = oversized ? { 'org.example.padding': 'x'.repeat(ANSWER_PADDING_BYTES) } : {};
    this.#json(res, { next_batch: `s${this.#pos}`, rooms: { join, invite, leave: {} }, account_data: { events: accountData }, ...padding });
  }

  /**
   * GET /rooms/{roomId}/messages as Synapse serves it (handlers/pagination.py): tokens are
   * stream positions (`s<pos>`, as /sync's); dir=b reads back from `from` (inclusive, default
   * the newest) to `to` (exclusive), newest first; dir=f forwards from `from` (exclusive) up to
   * `to` (inclusive). `limit` counts the events the filter's `types`/`not_types` let through
   * (default 10, at most 1000). `end` is the token to go on from; with no events it is left
   * out, which tells the client there is nothing more.
   */
  #messages(res: ServerResponse, url: URL, oversized = false) {
    const roomId = decodeURIComponent(url.pathname.split('/')[5]!);
    if (!this.#joined.has(roomId)) return this.#error(res, 403, 'M_FORBIDDEN', `User ${this.userId} not in room ${roomId}`);
    const q = url.searchParams;
    const dir = q.get('dir') ?? 'f';
    if (dir !== 'b' && dir !== 'f') return this.#error(res, 400, 'M_INVALID_PARAM', "Query parameter 'dir' must be one of ['b', 'f']");
    const token = (name: string): number | undefined | null => {
      const t = q.get(name);
      if (t === null) return undefined;
      return /^s\d+$/.test(t) ? Number(t.slice(1)) : null;
    };
    const from = token('from');
    const to = token('to');
    if (from === null) return this.#error(res, 400, 'M_UNKNOWN', "'from' parameter is invalid");
    if (to === null) return this.#error(res, 400, 'M_UNKNOWN', "'to' parameter is invalid");
    const limitParam = Number(q.get('limit') ?? DEFAULT_MESSAGES_LIMIT);
    if (!Number.isInteger(limitParam) || limitParam < 0) return this.#error(res, 400, 'M_INVALID_PARAM', 'Limit must be 0 or above');
    const limit = Math.min(limitParam, MAX_MESSAGES_LIMIT);
    const filter = q.get('filter')?.startsWith('{') ? JSON.parse(q.get('filter')!) : {};
    const matches = (type: string, list: unknown) =>
      Array.isArray(list) && list.some((p) => typeof p === 'string' && (p === type || (p.endsWith('*') && type.startsWith(p.slice(0, -1)))));
    const wanted = (t: TimelineEntry) =>
      t.roomId === roomId && (!Array.isArray(filter.types) || matches(t.event.type, filter.types)) && !matches(t.event.type, filter.not_types);
    const start = dir === 'b' ? (from ?? this.#pos) : (from ?? 0);
    const inRange = (t: TimelineEntry) =>
      dir === 'b' ? t.pos <= start && (to === undefined || t.pos > to) : t.pos > start && (to === undefined || t.pos <= to);
    const entries = this.#timeline.filter((t) => wanted(t) && inRange(t));
    const page = (dir === 'b' ? entries.reverse() : entries).slice(0, limit);
    const padding = oversized ? { 'org.example.padding': 'x'.repeat(ANSWER_PADDING_BYTES) } : {};
    if (!page.length) return this.#json(res, { chunk: [], start: `s${start}`, ...padding });
    const last = page.at(-1)!;
    const end = dir === 'b' ? last.pos - 1 : last.pos;
    this.#json(res, { chunk: page.map((t) => t.event), start: `s${start}`, end: `s${end}`, ...padding });
  }
}

function endpointName(method: string, path: string): string {
  if (path === '/_matrix/client/versions') return 'versions';
  const p = path.replace(/^\/_matrix\/client\/(v3|r0)/, '');
  if (p === '/account/whoami') return 'whoami';
  if (p === '/sync') return 'sync';
  if (/^\/profile\//.test(p)) return 'profile';
  if (/^\/user\/[^/]+\/account_data\//.test(p)) return 'account_data';
  if (/^\/join\//.test(p) || /^\/rooms\/[^/]+\/join$/.test(p)) return 'join';
  if (/^\/rooms\/[^/]+\/send\/m\.room\.message\/[^/]+$/.test(p) && method === 'PUT') return 'send';
  if (/^\/rooms\/[^/]+\/send\/m\.reaction\/[^/]+$/.test(p) && method === 'PUT') return 'react';
  if (/^\/rooms\/[^/]+\/redact\//.test(p)) return 'redact';
  if (/^\/rooms\/[^/]+\/typing\//.test(p)) return 'typing';
  if (/^\/rooms\/[^/]+\/messages$/.test(p) && method === 'GET') return 'messages';
  if (path.startsWith('/_matrix/client/v1/media/download/') || path.startsWith('/_matrix/media/v3/download/')) return 'media';
  return 'unknown';
}
