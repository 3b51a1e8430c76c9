import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import { FakeThreads, type ParentType } from './threads.js';

export interface RestCall {
  method: string;
  path: string;
  body: Record<string, any> | undefined;
  /** The query string, without its `?` (empty when none). */
  query: string;
  at: number;
}

export interface StoredMessage {
  id: string;
  nonce?: string;
  createdAt: number;
  channelId: string;
  content: string;
  allowedMentions: unknown;
  reference?: string;
  deleted: boolean;
  edits: number;
  /** Message components (action rows of buttons) as sent; a PATCH with `components` replaces them. */
  components?: Array<{ type: number; components: Array<{ type: number; style: number; label: string; custom_id: string }> }>;
}

export type RestFault =
  | { status: 429; retryAfter: number; global?: boolean }
  | { status: 401 | 403 | 404 | 500 | 502 }
  | { delayMs: number }
  /** The request is carried out (a message stored, an edit made), then answered with this 5xx, as by an edge that timed out waiting for Discord. */
  | { status: 500 | 502 | 503 | 504; afterStoring: true };

/** How long Discord waits for an interaction's first answer (its callback) before the token is void ("This interaction failed"). */
export const INTERACTION_ANSWER_MS = 3000;
/** How long an interaction's token takes follow-ups after the event. */
export const INTERACTION_TOKEN_MS = 15 * 60_000;

const EPOCH = 1420070400000n;
let counter = 0n;
/** A Discord snowflake, increasing (for a time `atMs`, now by default). */
export function snowflake(atMs = Date.now()): string {
  return String(((BigInt(atMs) - EPOCH) << 22n) | (counter++ & 0xfffn));
}

/** `GET /channels/{id}/threads/archived/public` and `GET /channels/{id}/users/@me/threads/archived/private`. */
const ARCHIVED_THREADS = /^\/api\/v10\/channels\/(\d+)\/(threads\/archived\/public|users\/@me\/threads\/archived\/private)$/;

/** What `GET /channels/{id}/messages` takes: `limit` 1–100, 50 when not given. */
export const MESSAGES_PAGE_DEFAULT = 50;
export const MESSAGES_PAGE_MAX = 100;

/** Discord's checks on components: action rows (type 1) of at most 5 buttons (type 2), custom_id ≤ 100, label ≤ 80. */
function componentsProblem(components: unknown): string | undefined {
  if (components === undefined) return undefined;
  if (!Array.isArray(components) || components.length > 5) return 'components must be at most 5 action rows';
  for (const row of components as Array<{ type?: number; components?: Array<{ type?: number; custom_id?: string; label?: string; style?: number }> }>) {
    if (row.type !== 1 || !Array.isArray(row.components) || row.components.length > 5) return 'each component row must be an action row of at most 5';
    for (const b of row.components) {
      if (b.type !== 2 || !b.style || b.style > 6) return 'buttons must be type 2 with a style';
      if (!b.custom_id || b.custom_id.length > 100) return 'custom_id must be 1 to 100 characters';
      if ((b.label ?? '').length > 80) return 'label must be at most 80 characters';
    }
  }
  return undefined;
}

interface Session {
  id: string;
  /** `[shard_id, num_shards]` as IDENTIFY gave it. */
  shard: [number, number];
  events: Array<{ s: number; t: string; d: unknown }>;
  socket: WebSocket | undefined;
}

/** A guild of the fake: its text channel and two threads. */
export interface FakeGuild {
  id: string;
  channel: string;
  thread: string;
  thread2: string;
}

/** The shard that receives a guild's events: `(guild_id >> 22) % num_shards`, as Discord documents. */
export function shardOf(guildId: string, shardCount: number): number {
  return Number((BigInt(guildId) >> 22n) % BigInt(shardCount));
}

/**
 * Discord on 127.0.0.1 for discord.js: REST (`/gateway/bot`, messages, typing, the archived
 * threads' listings (threads.ts), 429 with Retry-After and X-RateLimit headers) and a JSON
 * gateway (HELLO, heartbeat ACKs, IDENTIFY, READY, GUILD_CREATE, MESSAGE_CREATE, THREAD_UPDATE,
 * op 7 RECONNECT, RESUME with replay of missed events, INVALID_SESSION, and closing with any
 * code on demand). Sharded like Discord: IDENTIFY's
 * `shard: [id, count]` opens that shard's session, a guild's events go only to the shard
 * `shardOf(guild_id, count)` and DMs to shard 0; one session per shard id (the newest).
 * Button clicks are interactions as on Discord: the callback is taken within 3 s of the
 * event only (then 404 Unknown interaction), follow-ups on the token once it was answered.
 */
export class FakeDiscord {
  readonly bot = { id: snowflake(), username: 'channeld-test', discriminator: '0', global_name: null, bot: true, avatar: null };
  readonly guild: FakeGuild = { id: snowflake(), channel: snowflake(), thread: snowflake(), thread2: snowflake() };
  /** Every guild the bot is in (`guild` first); `addGuild` adds one on a chosen shard. */
  readonly guilds: FakeGuild[] = [this.guild];
  /** What `/gateway/bot` recommends: its `shards` and `session_start_limit.max_concurrency`. */
  recommendedShards = 1;
  maxConcurrency = 1;
  readonly dmChannel = snowflake();
  readonly rest: RestCall[] = [];
  /** Files the bot attached to messages (a multipart post), with their bytes. */
  readonly files: Array<{ channelId: string; messageId: string; name: string; mime: string; bytes: Buffer }> = [];
  readonly messages: StoredMessage[] = [];
  /** The bot's own reactions, by `channelId:messageId`. */
  readonly reactions = new Map<string, string[]>();
  readonly gateway = { identifies: 0, resumes: 0, connections: 0, heartbeats: 0 };
  /** Close code to answer IDENTIFY with (4004 bad token, 4014 disallowed intents…). */
  identifyCloseCode: number | undefined;
  url = '';
  /** The live session of each shard id. */
  readonly #sessions = new Map<number, Session>();
  readonly #faults = new Map<string, RestFault[]>();
  /**
   * When set, a message POST carrying `enforce_nonce` gets this answer instead, as from a
   * Discord-compatible server without it: 400 Invalid Form Body naming the field, or (with
   * `raw`) this status and raw body, a proxy's error page.
   */
  enforceNonceAnswer: { status: number; raw?: string; json?: object } | undefined;
  readonly #http: Server;
  readonly #wss: WebSocketServer;
  /** Channels beyond each guild's first, and every thread, with their archiving (threads.ts). */
  readonly #threads = new FakeThreads(this.bot.id, (id) => this.#lastMessageId(id));

  constructor(readonly token = 'MTAxNTAwMDAwMDAwMDAwMDAwMA.Gfake1.fake-token-for-tests-only-xxxxxxxx') {
    this.#register(this.guild);
    this.#http = createServer((req, res) => void this.#handle(req, res));
    this.#wss = new WebSocketServer({ server: this.#http });
    this.#wss.on('connection', (ws) => this.#gatewayConnection(ws));
  }

  async start(): Promise<string> {
    await new Promise<void>((r) => this.#http.listen(0, '127.0.0.1', () => r()));
    this.url = `http://127.0.0.1:${(this.#http.address() as AddressInfo).port}`;
    return this.url;
  }

  get restApi(): string {
    return `${this.url}/api`;
  }

  async close(): Promise<void> {
    for (const ws of this.#wss.clients) ws.terminate();
    await new Promise<void>((r) => this.#wss.close(() => r()));
    this.#http.closeAllConnections();
    await new Promise<void>((r) => this.#http.close(() => r()));
  }

  /** The next `times` REST calls matching `key` ("PATCH message", "POST message", "POST typing", "GET gateway") get `fault`. */
  fail(key: string, fault: RestFault, times = 1): void {
    this.#faults.set(key, [...(this.#faults.get(key) ?? []), ...Array<RestFault>(times).fill(fault)]);
  }

  restCalls(method: string, kind: 'message' | 'typing' | 'gateway' | 'threads'): RestCall[] {
    return this.rest.filter((c) => c.method === method && this.#kind(c.path) === kind);
  }

  /** Latest texts of the bot's live messages in a channel, in send order. */
  texts(channelId: string): string[] {
    return this.messages.filter((m) => m.channelId === channelId && !m.deleted).map((m) => m.content);
  }

  /** Whether shard 0 (the only one of an unsharded bot) has an open gateway socket. */
  get connected(): boolean {
    return this.shardConnected(0);
  }

  shardConnected(shard: number): boolean {
    return this.#sessions.get(shard)?.socket?.readyState === 1;
  }

  /** A guild whose events Discord sends to `shard` of `shardCount` (its id's timestamp picks it). */
  addGuild(shard: number, shardCount: number): FakeGuild {
    let ms = BigInt(Date.now()) - EPOCH;
    while (Number(ms % BigInt(shardCount)) !== shard) ms++;
    const id = String((ms << 22n) | (counter++ & 0xfffn));
    const guild = { id, channel: snowflake(), thread: snowflake(), thread2: snowflake() };
    this.guilds.push(guild);
    this.#register(guild);
    return guild;
  }

  /** A guild's first text channel and its two public threads, in the thread registry. */
  #register(g: FakeGuild): void {
    this.#threads.addParent({ id: g.channel, guildId: g.id, type: 0, name: 'general' });
    this.#threads.addThread({ id: g.thread, guildId: g.id, parentId: g.channel, type: 11, name: 'thread 1' });
    this.#threads.addThread({ id: g.thread2, guildId: g.id, parentId: g.channel, type: 11, name: 'thread 2' });
  }

  /** Another channel in a guild: text (0), announcement (5), forum (15) or media (16). */
  addParent(type: ParentType, guild: FakeGuild = this.guild): string {
    const id = snowflake();
    this.#threads.addParent({ id, guildId: guild.id, type, name: `channel ${id}` });
    return id;
  }

  /** A thread (a forum post in a forum) in `parentId`: public, or private (`joined`: the bot was added to it). */
  addThread(parentId: string, o: { private?: boolean; joined?: boolean } = {}): string {
    const parent = this.#threads.parents.get(parentId);
    if (!parent) throw new Error(`no channel ${parentId} holds threads`);
    const id = snowflake();
    const type = o.private ? 12 : parent.type === 5 ? 10 : 11;
    this.#threads.addThread({ id, guildId: parent.guildId, parentId, type, name: `thread ${id}`, botJoined: o.private ? (o.joined ?? false) : true });
    return id;
  }

  /**
   * Discord archives a thread (its inactivity period ran out) at `atMs` (now by default): it
   * leaves GUILD_CREATE's active threads and is listed under the parent's archived ones. A
   * connected shard is told (THREAD_UPDATE); one away learns nothing of it.
   */
  archiveThread(threadId: string, o: { atMs?: number } = {}): void {
    const t = this.#threads.archive(threadId, o.atMs ?? Date.now());
    if ([...this.#sessions.values()].some((s) => s.socket?.readyState === 1 && s.shard[0] === shardOf(t.guildId, s.shard[1])))
      this.dispatch('THREAD_UPDATE', this.#threads.apiThread(t));
  }

  /** The newest message of a channel (a user's or the bot's), as its `last_message_id`. */
  #lastMessageId(channelId: string): string | null {
    const ids = [...(this.#history.get(channelId) ?? []).map((m) => String(m.id)), ...this.messages.filter((m) => m.channelId === channelId).map((m) => m.id)];
    return ids.length ? ids.reduce((a, b) => (BigInt(a) > BigInt(b) ? a : b)) : null;
  }

  // ——— acting as users and as Discord ———

  #author(o?: { id?: string; username?: string; bot?: boolean }) {
    return {
      id: o?.id ?? '424242424242424242',
      username: o?.username ?? 'ada',
      discriminator: '0',
      global_name: 'Ada',
      avatar: null,
      ...(o?.bot ? { bot: true } : {}),
    };
  }

  /** Users' messages by channel, as `GET /channels/{id}/messages` returns them (the bot's own come from `messages`). */
  readonly #history = new Map<string, Array<Record<string, unknown>>>();
  /** Channels whose history the bot may not read (403 Missing Access). */
  readonly #forbidden = new Set<string>();
  /** Set inside `whileAway`: messages are stored in the history only, not dispatched. */
  #away: { atMs: number } | undefined;

  /**
   * Messages posted while the bot was away: each `guildMessage`/`dm` inside `post` goes into
   * the channel's history (what `GET /channels/{id}/messages` reads) without a gateway event,
   * created `ageMs` ago (0: now). Returns what `post` returns.
   */
  whileAway<T>(post: () => T, o: { ageMs?: number } = {}): T {
    this.#away = { atMs: Date.now() - (o.ageMs ?? 0) };
    try {
      return post();
    } finally {
      this.#away = undefined;
    }
  }

  /** The bot loses access to a channel's history: reading it answers 403 Missing Access. */
  forbidChannel(channelId: string): void {
    this.#forbidden.add(channelId);
  }

  #message(channelId: string, content: string, extra: Record<string, unknown>) {
    const away = this.#away;
    const atMs = away?.atMs ?? Date.now();
    const id = snowflake(atMs);
    const payload = {
      id,
      channel_id: channelId,
      content,
      timestamp: new Date(atMs).toISOString(),
      edited_timestamp: null,
      tts: false,
      mention_everyone: false,
      mention_roles: [],
      attachments: [],
      embeds: [],
      pinned: false,
      type: 0,
      flags: 0,
      ...extra,
    };
    this.#history.set(channelId, [...(this.#history.get(channelId) ?? []), payload]);
    this.#threads.messagePosted(channelId, atMs);
    if (!away) this.dispatch('MESSAGE_CREATE', payload);
    return id;
  }

  /** A user's message from the history (one posted while away too) dispatched as MESSAGE_CREATE, as a replay would. */
  dispatchStored(messageId: string): void {
    const payload = [...this.#history.values()].flat().find((m) => m.id === messageId);
    if (!payload) throw new Error(`no stored message ${messageId}`);
    this.dispatch('MESSAGE_CREATE', payload);
  }

  /**
   * `GET /channels/{id}/messages` as Discord documents it: `limit` 1–100 (default 50, else 400);
   * `after`: the `limit` messages just after that id, `before`: just before it, neither: the
   * newest; always newest first. An unknown channel is 404 Unknown Channel, a forbidden one 403.
   */
  #readHistory(channelId: string, query: URLSearchParams): { status: number; body: unknown } {
    const known = this.#threads.knows(channelId) || channelId === this.dmChannel || this.#history.has(channelId);
    if (!known) return { status: 404, body: { message: 'Unknown Channel', code: 10003 } };
    if (this.#forbidden.has(channelId)) return { status: 403, body: { message: 'Missing Access', code: 50001 } };
    const limit = query.has('limit') ? Number(query.get('limit')) : MESSAGES_PAGE_DEFAULT;
    if (!Number.isInteger(limit) || limit < 1 || limit > MESSAGES_PAGE_MAX)
      return { status: 400, body: { message: 'Invalid Form Body', code: 50035, errors: { limit: { _errors: [{ code: 'NUMBER_TYPE_MAX' }] } } } };
    const bots = this.messages.filter((m) => m.channelId === channelId && !m.deleted).map((m) => this.#apiMessage(m) as Record<string, unknown>);
    // REST messages carry neither guild_id nor member (those come with the gateway event only).
    const users = (this.#history.get(channelId) ?? []).map(({ guild_id: _g, member: _m, ...rest }) => rest);
    const all = [...users, ...bots].sort((a, b) => (BigInt(String(a.id)) < BigInt(String(b.id)) ? -1 : 1));
    const after = query.get('after');
    const before = query.get('before');
    let page: Array<Record<string, unknown>>;
    if (after) page = all.filter((m) => BigInt(String(m.id)) > BigInt(after)).slice(0, limit);
    else if (before) page = all.filter((m) => BigInt(String(m.id)) < BigInt(before)).slice(-limit);
    else page = all.slice(-limit);
    return { status: 200, body: page.toReversed() };
  }

  /** A message in the guild's text channel (or a thread, or `in` any channel or thread of the fake's); `mention` prefixes <@bot>. */
  guildMessage(
    text: string,
    o: {
      thread?: 1 | 2;
      in?: string;
      mention?: boolean;
      author?: { id?: string; username?: string; bot?: boolean };
      replyToBot?: string;
      guild?: FakeGuild;
    } = {},
  ): string {
    const inGuild = o.in ? this.guilds.find((g) => g.id === this.#threads.guildOf(o.in!)) : undefined;
    if (o.in && !inGuild) throw new Error(`no guild channel ${o.in}`);
    const guild = inGuild ?? o.guild ?? this.guild;
    const channelId = o.in ?? (o.thread === 2 ? guild.thread2 : o.thread ? guild.thread : guild.channel);
    const author = this.#author(o.author);
    const content = o.mention ? `<@${this.bot.id}> ${text}` : text;
    return this.#message(channelId, content, {
      guild_id: guild.id,
      channel_type: this.#threads.typeOf(channelId) ?? 0,
      author,
      member: { roles: [], joined_at: new Date().toISOString(), deaf: false, mute: false, flags: 0 },
      mentions: o.mention ? [{ ...this.bot }] : [],
      ...(o.replyToBot
        ? {
            message_reference: { message_id: o.replyToBot, channel_id: channelId, guild_id: guild.id },
            referenced_message: null,
            type: 19,
            mentions: [{ ...this.bot }],
          }
        : {}),
    });
  }

  /**
   * Interaction callbacks received (POST /interactions/:id/:token/callback), in order, with
   * Discord's answer: 204, 404 (Unknown interaction: past INTERACTION_ANSWER_MS, or no such
   * token) or 400 (already acknowledged).
   */
  readonly interactionCallbacks: Array<{ id: string; type: number; status: number; afterMs: number }> = [];
  /** Follow-up messages (POST /webhooks/:application/:token), with the interaction they answer. */
  readonly followUps: Array<{ interactionId: string; content: string; flags: number; status: number }> = [];
  /** When set, interaction callbacks get no answer until the client hangs up (counted in callbacksHungUp). */
  holdInteractionCallbacks = false;
  callbacksHungUp = 0;
  /** Each interaction sent: its token, when it was sent, and whether its first answer came in time. */
  readonly #interactions = new Map<string, { token: string; at: number; answered: boolean }>();

  /** Whether Discord's window for interaction `id`'s first answer has closed (INTERACTION_ANSWER_MS after it was sent). */
  answerWindowClosed(id: string): boolean {
    const i = this.#interactions.get(id);
    return !!i && Date.now() - i.at >= INTERACTION_ANSWER_MS;
  }

  /**
   * A user clicks a button of one of the bot's messages: INTERACTION_CREATE of type 3
   * (MESSAGE_COMPONENT) with the button's custom_id. Discord takes a callback within 3 s
   * (INTERACTION_ANSWER_MS), then follow-ups on the token for 15 minutes.
   */
  click(message: StoredMessage, label: string, user?: { id?: string; username?: string }): string {
    const button = message.components?.flatMap((r) => r.components).find((b) => b.label === label);
    if (!button) throw new Error(`message ${message.id} has no button "${label}"`);
    const id = snowflake();
    const token = `interaction-token-${id}`;
    this.#interactions.set(id, { token, at: Date.now(), answered: false });
    const author = this.#author(user);
    // Every user has a DM channel of their own: a channel of no guild is one.
    const inGuild = this.guilds.some((g) => [g.channel, g.thread, g.thread2].includes(message.channelId));
    const guild = this.guilds.find((g) => [g.channel, g.thread, g.thread2].includes(message.channelId)) ?? this.guild;
    const threadParent = message.channelId === guild.thread || message.channelId === guild.thread2 ? guild.channel : undefined;
    this.dispatch('INTERACTION_CREATE', {
      id,
      application_id: this.bot.id,
      type: 3,
      data: { custom_id: button.custom_id, component_type: 2 },
      channel_id: message.channelId,
      channel: inGuild
        ? { id: message.channelId, type: threadParent ? 11 : 0, guild_id: guild.id, ...(threadParent ? { parent_id: threadParent } : {}) }
        : { id: message.channelId, type: 1, recipients: [author] },
      ...(inGuild
        ? {
            guild_id: guild.id,
            member: { user: author, roles: [], joined_at: new Date().toISOString(), deaf: false, mute: false, flags: 0, permissions: '3072' },
          }
        : { user: author }),
      token,
      version: 1,
      message: this.#apiMessage(message),
      app_permissions: '3072',
      locale: 'en-US',
      entitlements: [],
      authorizing_integration_owners: {},
      context: inGuild ? 0 : 1,
    });
    return id;
  }

  /** A DM; each user has a DM channel of their own with the bot (`channelId`, `dmChannel` by default). */
  dm(text: string, author?: { id?: string; username?: string }, channelId = this.dmChannel): string {
    return this.#message(channelId, text, { author: this.#author(author), mentions: [], channel_type: 1 });
  }

  // ——— the CDN: attachments at /attachments/<channel>/<id>/<name>?ex=&is=&hm= (signed, no token) ———

  readonly #cdn = new Map<string, Buffer>();
  /** CDN paths downloaded, in order. */
  readonly cdnDownloads: string[] = [];

  /** A DM carrying one file, as Discord sends it: the attachment object with its CDN url. */
  dmWithFile(
    text: string,
    file: { bytes: Buffer; filename: string; content_type: string; size?: number; duration_secs?: number },
    author?: { id?: string; username?: string },
  ): string {
    const id = snowflake();
    const path = `/attachments/${this.dmChannel}/${id}/${file.filename}`;
    this.#cdn.set(path, file.bytes);
    const url = `${this.url}${path}?ex=ffffffff&is=00000000&hm=${'ab'.repeat(32)}&`;
    const attachment = {
      id,
      filename: file.filename,
      size: file.size ?? file.bytes.length,
      url,
      proxy_url: url,
      content_type: file.content_type,
      ...(file.content_type.startsWith('image/') ? { width: 64, height: 64 } : {}),
      // A voice message carries its length (and a waveform, not needed here).
      ...(file.duration_secs !== undefined ? { duration_secs: file.duration_secs, flags: 1 << 13 } : {}),
    };
    return this.#message(this.dmChannel, text, { author: this.#author(author), mentions: [], channel_type: 1, attachments: [attachment] });
  }

  #serveCdn(path: string, res: ServerResponse): boolean {
    if (!path.startsWith('/attachments/')) return false;
    const bytes = this.#cdn.get(path);
    if (!bytes) return (void res.writeHead(404).end(), true);
    this.cdnDownloads.push(path);
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(bytes.length) }).end(bytes);
    return true;
  }

  /** How each MESSAGE_CREATE went out: written to an open socket, or kept for a resume. */
  readonly delivery = new Map<string, { session: string; seq: number; written: boolean; at: number }>();

  /**
   * Sends a dispatch on the session of the shard it belongs to (kept for replay if the client
   * is away): a guild's events to `shardOf(guild_id, count)`, everything else to shard 0.
   */
  dispatch(t: string, d: unknown): void {
    const guildId = (d as { guild_id?: string } | null)?.guild_id;
    const session = [...this.#sessions.values()].find((s) => s.shard[0] === (guildId ? shardOf(guildId, s.shard[1]) : 0));
    if (!session) throw new Error(`no gateway session yet for the shard of ${guildId ? `guild ${guildId}` : 'DMs'}`);
    this.#emit(session, t, d);
  }

  #emit(session: Session, t: string, d: unknown): void {
    const event = { s: session.events.length + 1, t, d };
    session.events.push(event);
    const written = session.socket?.readyState === 1;
    if (written) session.socket!.send(JSON.stringify({ op: 0, ...event }));
    if (t === 'MESSAGE_CREATE') this.delivery.set((d as { id: string }).id, { session: session.id, seq: event.s, written, at: Date.now() });
  }

  /** op 7: the client should reconnect and resume. */
  requestReconnect(shard = 0): void {
    this.#sessions.get(shard)?.socket?.send(JSON.stringify({ op: 7, d: null }));
  }

  /** op 9: the session is invalid; `resumable` says whether to resume. */
  invalidateSession(resumable: boolean, shard = 0): void {
    this.#sessions.get(shard)?.socket?.send(JSON.stringify({ op: 9, d: resumable }));
  }

  closeGateway(code: number, shard = 0): void {
    this.#sessions.get(shard)?.socket?.close(code, 'closed by the fake');
  }

  // ——— gateway ———

  #gatewayConnection(ws: WebSocket): void {
    this.gateway.connections++;
    ws.send(JSON.stringify({ op: 10, d: { heartbeat_interval: 45000 } }));
    ws.on('message', (raw) => {
      const p = JSON.parse(String(raw)) as { op: number; d: any };
      switch (p.op) {
        case 1:
          this.gateway.heartbeats++;
          ws.send(JSON.stringify({ op: 11 }));
          break;
        case 2:
          this.gateway.identifies++;
          if (p.d.token !== this.token) return ws.close(4004, 'Authentication failed.');
          if (this.identifyCloseCode) return ws.close(this.identifyCloseCode, 'refused by the fake');
          {
            // Discord closes with 4010 (Invalid shard) for a shard id outside [0, count).
            const [id, count] = (p.d.shard ?? [0, 1]) as [number, number];
            if (!Number.isInteger(id) || !Number.isInteger(count) || count < 1 || id < 0 || id >= count) return ws.close(4010, 'Invalid shard.');
            this.#identify(ws, [id, count]);
          }
          break;
        case 6: {
          this.gateway.resumes++;
          const s = [...this.#sessions.values()].find((x) => x.id === p.d.session_id);
          if (!s || p.d.token !== this.token) {
            ws.send(JSON.stringify({ op: 9, d: false }));
            return;
          }
          s.socket = ws;
          for (const e of s.events.filter((e) => e.s > p.d.seq)) ws.send(JSON.stringify({ op: 0, ...e }));
          this.#emit(s, 'RESUMED', {});
          break;
        }
      }
    });
  }

  /** When each session was identified and for which `[shard, count]`, for tests that follow a restart. */
  readonly sessions: Array<{ id: string; at: number; shard: [number, number] }> = [];

  #identify(ws: WebSocket, shard: [number, number]): void {
    const session: Session = { id: `session-${snowflake()}`, shard, events: [], socket: ws };
    this.sessions.push({ id: session.id, at: Date.now(), shard });
    this.#sessions.set(shard[0], session);
    const url = this.url.replace('http', 'ws');
    const guilds = this.guilds.filter((g) => shardOf(g.id, shard[1]) === shard[0]);
    this.#emit(session, 'READY', {
      v: 10,
      user: { ...this.bot, verified: true, flags: 0, mfa_enabled: false },
      guilds: guilds.map((g) => ({ id: g.id, unavailable: true })),
      shard,
      session_id: session.id,
      resume_gateway_url: url,
      application: { id: this.bot.id, flags: 0 },
      private_channels: [],
    });
    const now = new Date().toISOString();
    for (const g of guilds)
      this.#emit(session, 'GUILD_CREATE', {
        id: g.id,
        name: g === this.guild ? 'Test guild' : `Test guild ${g.id}`,
        unavailable: false,
        owner_id: '1',
        joined_at: now,
        large: false,
        member_count: 2,
        features: [],
        emojis: [],
        stickers: [],
        roles: [{ id: g.id, name: '@everyone', permissions: '3072', position: 0, color: 0, hoist: false, managed: false, mentionable: false, flags: 0 }],
        channels: this.#threads.apiParents(g.id),
        // Active threads only: an archived one is listed by GET /channels/{id}/threads/archived/*.
        threads: this.#threads.apiActiveThreads(g.id),
        members: [],
        presences: [],
        voice_states: [],
        stage_instances: [],
        guild_scheduled_events: [],
      });
  }

  // ——— REST ———

  #kind(path: string): 'message' | 'typing' | 'gateway' | 'threads' | undefined {
    if (path === '/api/v10/gateway/bot') return 'gateway';
    if (ARCHIVED_THREADS.test(path)) return 'threads';
    if (/\/channels\/\d+\/typing$/.test(path)) return 'typing';
    if (/\/channels\/\d+\/messages(\/\d+)?$/.test(path)) return 'message';
    return undefined;
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const [path = '', query = ''] = (req.url ?? '').split('?');
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    // A message with files is a multipart form: `payload_json` and `files[N]` parts.
    const uploads: Array<{ name: string; mime: string; bytes: Buffer }> = [];
    let body: Record<string, any> | undefined;
    if (String(req.headers['content-type'] ?? '').startsWith('multipart/form-data')) {
      const form = await new Request('http://fake/', {
        method: 'POST',
        headers: { 'content-type': req.headers['content-type']! },
        body: Buffer.concat(chunks),
      }).formData();
      const payload = form.get('payload_json');
      body = typeof payload === 'string' ? (JSON.parse(payload) as Record<string, any>) : {};
      for (const [k, v] of form)
        if (k.startsWith('files[') && typeof v !== 'string') uploads.push({ name: v.name, mime: v.type, bytes: Buffer.from(await v.arrayBuffer()) });
    } else body = raw ? (JSON.parse(raw) as Record<string, any>) : undefined;
    const method = req.method ?? 'GET';
    this.rest.push({ method, path, body, query, at: Date.now() });
    // A fault that lets the request through: its success is answered with a gateway's 5xx page.
    let failAfter: { status: number } | undefined;
    const json = (status: number, payload: unknown, headers: Record<string, string> = {}) => {
      if (failAfter && status < 300)
        return void res.writeHead(failAfter.status, { 'content-type': 'text/html' }).end(`<html><body>${failAfter.status}</body></html>`);
      if (status === 204) return void res.writeHead(204, headers).end();
      res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(payload));
    };
    if (method === 'GET' && this.#serveCdn(path, res)) return;
    const callback = /^\/api\/v10\/interactions\/(\d+)\/([^/]+)\/callback$/.exec(path);
    if (callback && method === 'POST') {
      // Interaction callbacks are authorised by the interaction's token, not the bot token.
      const i = this.#interactions.get(callback[1]!);
      const afterMs = i ? Date.now() - i.at : -1;
      const status = !i || i.token !== callback[2] || afterMs >= INTERACTION_ANSWER_MS ? 404 : i.answered ? 400 : 204;
      this.interactionCallbacks.push({ id: callback[1]!, type: Number(body?.type), status, afterMs });
      if (status === 404) return json(404, { message: 'Unknown interaction', code: 10062 });
      if (status === 400) return json(400, { message: 'Interaction has already been acknowledged.', code: 40060 });
      i!.answered = true;
      if (this.holdInteractionCallbacks) return void res.once('close', () => this.callbacksHungUp++);
      return json(204, null);
    }
    const followUp = /^\/api\/v10\/webhooks\/(\d+)\/([^/]+)$/.exec(path);
    if (followUp && method === 'POST') {
      // Authorised by the token too; Discord knows the webhook only once the interaction was answered.
      const [interactionId, i] = [...this.#interactions].find(([, x]) => x.token === followUp[2]) ?? [];
      const live = i?.answered && followUp[1] === this.bot.id && Date.now() - i.at < INTERACTION_TOKEN_MS;
      const status = live ? 200 : 404;
      this.followUps.push({ interactionId: interactionId ?? '', content: String(body?.content ?? ''), flags: Number(body?.flags ?? 0), status });
      if (!live) return json(404, { message: 'Unknown Webhook', code: 10015 });
      return json(200, {
        ...this.#apiMessage({
          id: snowflake(),
          createdAt: Date.now(),
          channelId: '',
          content: String(body?.content ?? ''),
          allowedMentions: undefined,
          deleted: false,
          edits: 0,
        }),
        flags: Number(body?.flags ?? 0),
      });
    }
    if (req.headers.authorization !== `Bot ${this.token}`) return json(401, { message: '401: Unauthorized', code: 0 });
    const kind = this.#kind(path);
    const refuse = this.enforceNonceAnswer;
    if (refuse && method === 'POST' && kind === 'message' && body?.enforce_nonce !== undefined) {
      if (refuse.raw !== undefined) return void res.writeHead(refuse.status, { 'content-type': 'text/html' }).end(refuse.raw);
      if (refuse.json) return json(refuse.status, refuse.json);
      return json(refuse.status, {
        message: 'Invalid Form Body',
        code: 50035,
        errors: { enforce_nonce: { _errors: [{ code: 'UNKNOWN_FIELD', message: 'This field is not allowed.' }] } },
      });
    }
    const fault = kind ? this.#faults.get(`${method} ${kind}`)?.shift() : undefined;
    if (fault && 'afterStoring' in fault) failAfter = fault;
    else if (fault) {
      if ('delayMs' in fault) await new Promise((r) => setTimeout(r, fault.delayMs));
      else if (fault.status === 429)
        return json(
          429,
          { message: 'You are being rate limited.', retry_after: fault.retryAfter, global: fault.global ?? false },
          {
            'retry-after': String(Math.ceil(fault.retryAfter)),
            'x-ratelimit-limit': '5',
            'x-ratelimit-remaining': '0',
            'x-ratelimit-reset-after': String(fault.retryAfter),
            'x-ratelimit-bucket': 'fake-bucket',
            'x-ratelimit-scope': 'user',
            ...(fault.global ? { 'x-ratelimit-global': 'true' } : {}),
          },
        );
      else return json(fault.status, { message: `fake ${fault.status}`, code: 0 });
    }
    if (kind === 'gateway')
      return json(200, {
        url: this.url.replace('http', 'ws'),
        shards: this.recommendedShards,
        session_start_limit: { total: 1000, remaining: 999, reset_after: 14400000, max_concurrency: this.maxConcurrency },
      });
    if (kind === 'typing') return json(204, null);
    const r = /\/channels\/(\d+)\/messages\/(\d+)\/reactions\/([^/]+)\/@me$/.exec(path);
    if (r && (method === 'PUT' || method === 'DELETE')) {
      const key = `${r[1]}:${r[2]}`;
      const emoji = decodeURIComponent(r[3]!);
      const list = (this.reactions.get(key) ?? []).filter((e) => e !== emoji);
      this.reactions.set(key, method === 'PUT' ? [...list, emoji] : list);
      return json(204, null);
    }
    const listing = ARCHIVED_THREADS.exec(path);
    if (listing && method === 'GET') {
      const parentId = listing[1]!;
      if (!this.#threads.knows(parentId)) return json(404, { message: 'Unknown Channel', code: 10003 });
      if (this.#forbidden.has(parentId)) return json(403, { message: 'Missing Access', code: 50001 });
      const page = this.#threads.listArchived(parentId, listing[2] === 'users/@me/threads/archived/private', new URLSearchParams(query));
      return json(page.status, page.body);
    }
    const m = /\/channels\/(\d+)\/messages(?:\/(\d+))?$/.exec(path);
    if (!m) return json(404, { message: 'Unknown route', code: 0 });
    const [, channelId, messageId] = m;
    if (method === 'GET' && !messageId) {
      const page = this.#readHistory(channelId!, new URLSearchParams(query));
      return json(page.status, page.body);
    }
    if (method === 'POST' && !messageId && uploads.length) {
      const msg: StoredMessage = {
        id: snowflake(),
        createdAt: Date.now(),
        channelId: channelId!,
        content: body?.content ?? '',
        allowedMentions: body?.allowed_mentions,
        deleted: false,
        edits: 0,
      };
      this.files.push(...uploads.map((u) => ({ ...u, channelId: channelId!, messageId: msg.id })));
      return json(200, this.#apiMessage(msg));
    }
    if (method === 'POST' && !messageId) {
      if (!body?.content || String(body.content).length > 2000) return json(400, { message: 'Invalid Form Body', code: 50035 });
      // enforce_nonce: the same nonce from the same author within a few minutes returns the first message.
      const same =
        body.enforce_nonce && body.nonce
          ? this.messages.find((m) => m.channelId === channelId && m.nonce === body.nonce && Date.now() - m.createdAt < 5 * 60_000)
          : undefined;
      if (same) return json(200, this.#apiMessage(same));
      const problem = componentsProblem(body.components);
      if (problem) return json(400, { message: `Invalid Form Body: ${problem}`, code: 50035 });
      const msg: StoredMessage = {
        id: snowflake(),
        createdAt: Date.now(),
        ...(body.components?.length ? { components: body.components } : {}),
        ...(body.nonce ? { nonce: String(body.nonce) } : {}),
        channelId: channelId!,
        content: body.content,
        allowedMentions: body.allowed_mentions,
        deleted: false,
        edits: 0,
        ...(body.message_reference ? { reference: body.message_reference.message_id } : {}),
      };
      this.messages.push(msg);
      return json(200, this.#apiMessage(msg));
    }
    const msg = this.messages.find((x) => x.id === messageId && x.channelId === channelId && !x.deleted);
    if (!msg) return json(404, { message: 'Unknown Message', code: 10008 });
    if (method === 'PATCH') {
      if (String(body?.content ?? '').length > 2000) return json(400, { message: 'Invalid Form Body', code: 50035 });
      const problem = componentsProblem(body?.components);
      if (problem) return json(400, { message: `Invalid Form Body: ${problem}`, code: 50035 });
      msg.content = body?.content;
      msg.allowedMentions = body?.allowed_mentions;
      if (body?.components) {
        if (body.components.length) msg.components = body.components;
        else delete msg.components;
      }
      msg.edits++;
      return json(200, this.#apiMessage(msg));
    }
    if (method === 'DELETE') {
      msg.deleted = true;
      return json(204, null);
    }
    return json(405, { message: '405: Method Not Allowed', code: 0 });
  }

  #apiMessage(m: StoredMessage) {
    return {
      id: m.id,
      channel_id: m.channelId,
      content: m.content,
      author: this.bot,
      components: m.components ?? [],
      timestamp: new Date(m.createdAt).toISOString(),
      edited_timestamp: m.edits ? new Date().toISOString() : null,
      tts: false,
      mention_everyone: false,
      mentions: [],
      mention_roles: [],
      attachments: [],
      embeds: [],
      pinned: false,
      type: 0,
    };
  }
}
