import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import { postsPage } from './posts.js';

/**
 * A route's next answer: a 429 with Retry-After, a server error, a dropped connection, or (the
 * streamed channel list) a failure after its first `cutAfter` channels (in whole pages of 100),
 * which the server reports by ending the list with its AppError instead of "]".
 */
export type MattermostFault =
  | { status: 429; retryAfter: number }
  | { status: 500 | 502 | 503 }
  | { drop: true }
  | { cutAfter: number; error?: { id: string; message: string; status_code: number } };
export type MattermostRoute = 'me' | 'teams' | 'channels' | 'myChannels' | 'since' | 'create' | 'patch' | 'delete' | 'typing' | 'file';

/** A channel the bot is in, as the fake keeps it. */
export interface MmFakeChannel {
  id: string;
  type: string;
  name: string;
  team_id: string;
  header?: string;
  /** When it was archived (`archive`); 0 or absent: it is not. */
  delete_at?: number;
}

export interface MmFakePost {
  id: string;
  create_at: number;
  update_at: number;
  edit_at: number;
  delete_at: number;
  user_id: string;
  channel_id: string;
  root_id: string;
  message: string;
  type: string;
  props: Record<string, unknown>;
  pending_post_id?: string;
  metadata?: { files?: Array<{ id: string; name: string; extension: string; size: number; mime_type: string }> };
  edits: number;
}

export interface MmCall {
  route: MattermostRoute;
  /** The URL's query parameters (the posts reads' since, before, after, page, per_page). */
  query: URLSearchParams;
  body: Record<string, unknown> | undefined;
  at: number;
}

const id26 = () => randomBytes(13).toString('hex');

/** The AppError of a channel list with no channel: the store's not-found, as the app layer words it. */
const NOT_FOUND = {
  id: 'app.channel.get_channels.not_found.app_error',
  message: 'No channels were found.',
  detailed_error: '',
  request_id: 'r',
  status_code: 404,
};

/** A channel as Mattermost's API sends it (model.Channel's fields, in its order), with its last post's time. */
function wireChannel(c: MmFakeChannel, lastPostAt: number): Record<string, unknown> {
  return {
    id: c.id,
    create_at: 1_700_000_000_000,
    update_at: 1_700_000_000_000,
    delete_at: c.delete_at ?? 0,
    team_id: c.team_id,
    type: c.type,
    display_name: c.type === 'D' ? '' : c.name,
    name: c.name,
    header: c.header ?? '',
    purpose: '',
    last_post_at: lastPostAt,
    total_msg_count: 0,
    extra_update_at: 0,
    creator_id: '',
    scheme_id: null,
    props: null,
    group_constrained: null,
    shared: false,
    total_msg_count_root: 0,
    policy_id: null,
    last_root_post_at: lastPostAt,
    banner_info: null,
    policy_enforced: false,
  };
}

/**
 * A Mattermost server on 127.0.0.1, as far as channeld uses it: API v4 REST behind a bearer
 * token (users/me, teams, the bot's channels (all at once, as the server sends them: a team's
 * in one answer, `users/me/channels` streamed a page at a time), a channel's posts since a time
 * or a page at a time, create, patch, delete, typing, files) with AppError bodies, and the WebSocket at
 * /api/v4/websocket: authentication_challenge, hello with a connection id, `posted` events
 * numbered by `seq`. Faults: 429 with Retry-After,
 * 5xx and dropped connections per route; dropped sockets, a gap in seq, a redelivered event;
 * a clock of its own (`clockOffsetMs`, moved mid-sequence by `onCall`), and answers without a Date header (`dateless`).
 * It never resumes a connection (a new connection id each time), as a server whose buffer
 * has moved on: the client must catch up over REST.
 */
export class FakeMattermost {
  readonly calls: MmCall[] = [];
  readonly posts = new Map<string, MmFakePost>();
  readonly files = new Map<string, Buffer>();
  readonly token = `mm${randomBytes(12).toString('hex')}`;
  readonly bot = { id: id26(), username: 'channeld' };
  readonly ada = { id: id26(), username: 'ada' };
  readonly bob = { id: id26(), username: 'bob' };
  readonly team = { id: id26(), name: 'acme', display_name: 'Acme' };
  /** The bot's DM with Ada, a team channel and a second one. */
  readonly dm: MmFakeChannel = { id: id26(), type: 'D', name: '', team_id: '' };
  readonly town: MmFakeChannel = { id: id26(), type: 'O', name: 'town-square', team_id: this.team.id };
  readonly offTopic: MmFakeChannel = { id: id26(), type: 'O', name: 'off-topic', team_id: this.team.id };
  /** Channels added by `addChannels`, by id. */
  readonly added = new Map<string, MmFakeChannel>();
  /** The ids of channels the bot has left (`leave`): out of its channel lists. */
  readonly #left = new Set<string>();
  /** TeamSettings.ExperimentalViewArchivedChannels: off, an archived channel's posts are refused (403). */
  viewArchivedChannels = true;
  /** How far the server's clock (its answers' Date header, the times it stamps posts with) is ahead of this machine's. */
  clockOffsetMs = 0;
  /** Routes answered without a Date header, as through a proxy that strips it. */
  readonly dateless = new Set<MattermostRoute>();
  /**
   * Run as each call is recorded, before it is answered: a test moves the server's clock
   * (`clockOffsetMs`) at a given point of a client's requests, as a real server's moves on between them.
   */
  onCall: ((call: MmCall) => void) | undefined;
  /** Routes this server does not have (an older version): answered 404 like an unknown path, and recorded in `calls`. */
  readonly absent = new Set<MattermostRoute>();
  /** The bytes of the last channel list answered. */
  channelListBytes = 0;
  /** Authentication challenges answered, and hellos sent. */
  connections = 0;
  /** The URL of the last WebSocket upgrade (with its resume parameters). */
  lastSocketUrl = '';
  url = '';
  readonly #faults = new Map<MattermostRoute, MattermostFault[]>();
  /** The answers of `dateless` routes. */
  readonly #datelessAnswers = new WeakSet<ServerResponse>();
  readonly #http: Server;
  readonly #wss: WebSocketServer;
  readonly #sockets = new Map<WebSocket, { seq: number }>();
  #skipNext = false;
  /**
   * The server time of the last post stored. Posts without a time of their own each get a later
   * millisecond, so tests that read order off the clock stay exact; a real server gives one
   * millisecond to posts made in it, which tests place with `createAt`.
   */
  #lastPostMs = 0;

  constructor() {
    this.#http = createServer((req, res) => void this.#handle(req, res));
    this.#wss = new WebSocketServer({ server: this.#http, path: '/api/v4/websocket' });
    this.#wss.on('connection', (ws, req) => {
      this.lastSocketUrl = req.url ?? '';
      this.#connection(ws);
    });
  }

  async start(): Promise<string> {
    await new Promise<void>((r) => this.#http.listen(0, '127.0.0.1', () => r()));
    this.url = `http://127.0.0.1:${(this.#http.address() as AddressInfo).port}`;
    return this.url;
  }

  async close(): Promise<void> {
    for (const ws of this.#wss.clients) ws.terminate();
    await new Promise<void>((r) => this.#wss.close(() => r()));
    this.#http.closeAllConnections();
    await new Promise<void>((r) => this.#http.close(() => r()));
  }

  fail(route: MattermostRoute, fault: MattermostFault, times = 1): void {
    this.#faults.set(route, [...(this.#faults.get(route) ?? []), ...Array<MattermostFault>(times).fill(fault)]);
  }

  callsOf(route: MattermostRoute): MmCall[] {
    return this.calls.filter((c) => c.route === route);
  }

  /** Whether an authenticated socket is open. */
  get connected(): boolean {
    return this.#sockets.size > 0;
  }

  /** The bot's posts in a channel, oldest first (deleted ones left out). */
  botPosts(channelId: string): MmFakePost[] {
    return [...this.posts.values()].filter((p) => p.channel_id === channelId && p.user_id === this.bot.id && !p.delete_at);
  }

  texts(channelId: string): string[] {
    return this.botPosts(channelId).map((p) => p.message);
  }

  /** Ends every socket without a close frame (a lost connection). */
  drop(): void {
    for (const ws of this.#sockets.keys()) ws.terminate();
    this.#sockets.clear();
  }

  /**
   * Resolves once every open socket answered a ping or closed: the client has read every event
   * sent before (its pong follows them), or dropped the connection.
   */
  async sync(): Promise<void> {
    await Promise.all(
      [...this.#sockets.keys()].map(
        (ws) =>
          new Promise<void>((resolve) => {
            if (ws.readyState === ws.CLOSED) return resolve();
            const done = () => {
              ws.off('pong', done);
              ws.off('close', done);
              resolve();
            };
            ws.on('pong', done);
            ws.on('close', done);
            if (ws.readyState === ws.OPEN) ws.ping();
          }),
      ),
    );
  }

  /** The next event skips a seq number (an event lost on the way). */
  skipSeq(): void {
    this.#skipNext = true;
  }

  #channel(id: string): MmFakeChannel | undefined {
    return [this.dm, this.town, this.offTopic].find((c) => c.id === id) ?? this.added.get(id);
  }

  /**
   * `count` more channels the bot is in: DMs with new users (a bot anyone can DM is in one per
   * person who did), or channels of the team (`type` "O" or "P"); `header` as their header.
   */
  addChannels(count: number, o: { type?: 'D' | 'O' | 'P'; header?: string } = {}): MmFakeChannel[] {
    const type = o.type ?? 'D';
    return Array.from({ length: count }, (_, i) => {
      const other = id26();
      const name = type === 'D' ? [this.bot.id, other].sort().join('__') : `room-${this.added.size}-${i}`;
      const c: MmFakeChannel = { id: id26(), type, name, team_id: type === 'D' ? '' : this.team.id, ...(o.header ? { header: o.header } : {}) };
      this.added.set(c.id, c);
      return c;
    });
  }

  /** The bot leaves these channels: its channel lists leave them out (none left: it is in no channel). */
  leave(...channels: Array<{ id: string }>): void {
    for (const c of channels) this.#left.add(c.id);
  }

  /** Archives a channel at `atMs` (now by default), as `DELETE /channels/{id}` does. */
  archive(channel: { id: string }, atMs = this.#nowMs()): void {
    this.#channel(channel.id)!.delete_at = atMs;
  }

  /**
   * Every channel the bot is in, with its last post's time, as the API sends them; archived ones
   * as the store's GetChannels filters them: only with `include_deleted`, and then those archived
   * at or after `last_delete_at` (all when it is 0).
   */
  #channelList(query: URLSearchParams): Array<Record<string, unknown>> {
    const last = new Map<string, number>();
    for (const p of this.posts.values()) last.set(p.channel_id, Math.max(last.get(p.channel_id) ?? 0, p.create_at));
    // strconv.ParseBool and strconv.Atoi, as the handler reads them.
    const includeDeleted = ['1', 't', 'T', 'TRUE', 'true', 'True'].includes(query.get('include_deleted') ?? '');
    const lastDeleteAt = Number.parseInt(query.get('last_delete_at') ?? '', 10) || 0;
    const listed = (c: MmFakeChannel) => !c.delete_at || (includeDeleted && c.delete_at >= lastDeleteAt);
    return [this.dm, this.town, this.offTopic, ...this.added.values()]
      .filter((c) => !this.#left.has(c.id) && listed(c))
      .map((c) => wireChannel(c, last.get(c.id) ?? 0));
  }

  /**
   * GET /users/me/channels as Mattermost streams it (api4/channel.go getChannelsForUser): "[",
   * pages of 100 channels each encoded by json.Encoder (a newline after each), commas, "]". The
   * "[" is written before the first page is read: with no channel the store's not-found
   * follows it (the handler's AppError, status 200 already sent), and no "]".
   */
  async #streamChannels(
    res: ServerResponse,
    query: URLSearchParams,
    cutAfter = Infinity,
    error = { id: 'app.channel.get_channels.get.app_error', message: 'Unable to get the channels.', status_code: 500 },
  ): Promise<void> {
    const list = this.#channelList(query);
    res.writeHead(200, { 'content-type': 'application/json', ...this.#date(res) });
    this.channelListBytes = 0;
    const write = async (text: string) => {
      this.channelListBytes += Buffer.byteLength(text);
      if (res.write(text) || res.destroyed) return;
      await new Promise<void>((resolve) => {
        const done = () => {
          res.off('drain', done).off('close', done);
          resolve();
        };
        res.on('drain', done).on('close', done);
      });
    };
    await write('[');
    if (!list.length) return void res.end(JSON.stringify(NOT_FOUND));
    for (let at = 0; at < list.length && !res.destroyed; at += 100) {
      if (at >= cutAfter) return void res.end(JSON.stringify(error));
      await write(
        `${at ? ',' : ''}${list
          .slice(at, at + 100)
          .map((c) => `${JSON.stringify(c)}\n`)
          .join(',')}`,
      );
    }
    this.channelListBytes += 1;
    res.end(']');
  }

  /** A new post, stored with the server's clock, or at `createAtMs` (an import, or an integration setting create_at). */
  #store(
    userId: string,
    channelId: string,
    rootId: string,
    message: string,
    props: Record<string, unknown>,
    extra: Partial<MmFakePost>,
    createAtMs?: number,
  ): MmFakePost {
    const now = createAtMs ?? Math.max(this.#nowMs(), this.#lastPostMs + 1);
    this.#lastPostMs = Math.max(this.#lastPostMs, now);
    const post: MmFakePost = {
      id: id26(),
      create_at: now,
      update_at: now,
      edit_at: 0,
      delete_at: 0,
      user_id: userId,
      channel_id: channelId,
      root_id: rootId,
      message,
      type: '',
      props,
      ...extra,
      edits: 0,
    };
    this.posts.set(post.id, post);
    return post;
  }

  /**
   * A user writes a post: stored, then broadcast as `posted` to every open socket (none open:
   * it is only stored, for a catch-up to find). `props` as an integration sets them (attachments:
   * the bulk of a large post); `createAt` the server time it was made at (posts may share one
   * millisecond). Returns the post.
   */
  userPost(
    text: string,
    o: {
      channel?: { id: string };
      user?: { id: string; username: string };
      rootId?: string;
      mention?: boolean;
      files?: MmFakePost['metadata'];
      props?: Record<string, unknown>;
      createAt?: number;
    } = {},
  ): MmFakePost {
    const channel = this.#channel(o.channel?.id ?? this.dm.id)!;
    const user = o.user ?? this.ada;
    const message = o.mention ? `@${this.bot.username} ${text}` : text;
    const post = this.#store(user.id, channel.id, o.rootId ?? '', message, o.props ?? {}, o.files ? { metadata: o.files } : {}, o.createAt);
    this.broadcast(this.postedEvent(post, user.username));
    return post;
  }

  /** The `posted` event of a post, as Mattermost sends it (the post and mentions as JSON strings). */
  postedEvent(post: MmFakePost, senderName: string): Record<string, unknown> {
    const channel = this.#channel(post.channel_id)!;
    const mentions = post.message.includes(`@${this.bot.username}`) || channel.type === 'D' ? [this.bot.id] : [];
    const { edits: _edits, ...wire } = post;
    return {
      event: 'posted',
      data: {
        channel_display_name: channel.name,
        channel_name: channel.name,
        channel_type: channel.type,
        post: JSON.stringify(wire),
        sender_name: `@${senderName}`,
        team_id: channel.team_id,
        ...(mentions.length ? { mentions: JSON.stringify(mentions) } : {}),
      },
      broadcast: { omit_users: null, user_id: '', channel_id: channel.id, team_id: '' },
    };
  }

  /** Sends an event to every open socket with that socket's next seq. */
  broadcast(event: Record<string, unknown>): void {
    for (const [ws, state] of this.#sockets) {
      if (this.#skipNext) state.seq++;
      ws.send(JSON.stringify({ ...event, seq: state.seq++ }));
    }
    this.#skipNext = false;
  }

  /** Sends an event to every open socket with the seq given (a replay of an event already sent). */
  replay(event: Record<string, unknown>, seq: number): void {
    for (const ws of this.#sockets.keys()) ws.send(JSON.stringify({ ...event, seq }));
  }

  #connection(ws: WebSocket): void {
    ws.on('message', (raw) => {
      let msg: { seq?: number; action?: string; data?: { token?: string } };
      try {
        msg = JSON.parse(String(raw)) as typeof msg;
      } catch {
        return;
      }
      if (msg.action === 'authentication_challenge') {
        if (msg.data?.token !== this.token) {
          ws.send(
            JSON.stringify({
              status: 'FAIL',
              seq_reply: msg.seq,
              error: { id: 'api.web_socket_router.not_authenticated.app_error', message: 'Invalid session' },
            }),
          );
          return;
        }
        ws.send(JSON.stringify({ status: 'OK', seq_reply: msg.seq }));
        this.connections++;
        const state = { seq: 0 };
        this.#sockets.set(ws, state);
        ws.send(
          JSON.stringify({
            event: 'hello',
            data: { connection_id: id26(), server_version: '10.5.0.fake' },
            broadcast: { user_id: this.bot.id },
            seq: state.seq++,
          }),
        );
      }
    });
    ws.on('close', () => this.#sockets.delete(ws));
  }

  /** The server's clock. */
  #nowMs(): number {
    return Date.now() + this.clockOffsetMs;
  }

  /** The Date header of an answer, unless its route is `dateless` (then none: node adds one unless told not to). */
  #date(res: ServerResponse): { date?: string } {
    if (this.#datelessAnswers.has(res)) {
      res.sendDate = false;
      return {};
    }
    return { date: new Date(this.#nowMs()).toUTCString() };
  }

  #answer(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
    res.writeHead(status, { 'content-type': 'application/json', ...this.#date(res), ...headers }).end(JSON.stringify(body));
  }

  #error(res: ServerResponse, status: number, id: string, message: string, headers: Record<string, string> = {}): void {
    this.#answer(res, status, { id, message, detailed_error: '', request_id: 'r', status_code: status }, headers);
  }

  #route(method: string, p: string[]): MattermostRoute | undefined {
    const path = p.join('/');
    if (method === 'GET' && path === 'users/me') return 'me';
    if (method === 'GET' && path === 'users/me/teams') return 'teams';
    if (method === 'GET' && p[0] === 'users' && p[1] === 'me' && p[2] === 'teams' && p[4] === 'channels') return 'channels';
    if (method === 'GET' && path === 'users/me/channels') return 'myChannels';
    if (method === 'GET' && p[0] === 'channels' && p[2] === 'posts') return 'since';
    if (method === 'POST' && path === 'posts') return 'create';
    if (method === 'PUT' && p[0] === 'posts' && p[2] === 'patch') return 'patch';
    if (method === 'DELETE' && p[0] === 'posts' && p.length === 2) return 'delete';
    if (method === 'POST' && p[0] === 'users' && p[2] === 'typing') return 'typing';
    if (method === 'GET' && p[0] === 'files' && p.length === 2) return 'file';
    return undefined;
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', this.url);
    if (!url.pathname.startsWith('/api/v4/')) return this.#error(res, 404, 'api.context.404.app_error', 'Sorry, we could not find the page.');
    const p = url.pathname.slice('/api/v4/'.length).split('/');
    let raw = '';
    for await (const chunk of req) raw += String(chunk);
    const route = this.#route(req.method ?? 'GET', p);
    if (!route) return this.#error(res, 404, 'api.context.404.app_error', 'Sorry, we could not find the page.');
    if (req.headers.authorization !== `Bearer ${this.token}`)
      return this.#error(res, 401, 'api.context.session_expired.app_error', 'Invalid or expired session, please login again.');
    let body: Record<string, unknown> | undefined;
    try {
      body = raw ? (JSON.parse(raw) as Record<string, unknown>) : undefined;
    } catch {
      return this.#error(res, 400, 'api.context.invalid_body_param.app_error', 'Invalid or missing body.');
    }
    const call: MmCall = { route, query: url.searchParams, body, at: Date.now() };
    this.calls.push(call);
    this.onCall?.(call);
    if (this.dateless.has(route)) this.#datelessAnswers.add(res);
    if (this.absent.has(route)) return this.#error(res, 404, 'api.context.404.app_error', 'Sorry, we could not find the page.');
    const fault = this.#faults.get(route)?.shift();
    if (fault) {
      if ('drop' in fault) return void req.socket.destroy();
      if ('cutAfter' in fault) return this.#streamChannels(res, url.searchParams, fault.cutAfter, fault.error);
      if ('retryAfter' in fault)
        return this.#error(res, 429, 'api.context.rate_limited', 'Too many requests', {
          'retry-after': String(fault.retryAfter),
          'x-ratelimit-reset': String(fault.retryAfter),
        });
      return this.#error(res, fault.status, 'api.context.server_error', 'Internal server error');
    }
    switch (route) {
      case 'me':
        return this.#answer(res, 200, { ...this.bot, is_bot: true });
      case 'teams':
        return this.#answer(res, 200, [this.team]);
      case 'channels': {
        // The team's channels and every DM and group message (which belong to no team), in one
        // answer; none is the store's not-found, a 404.
        const list = this.#channelList(url.searchParams).filter((c) => c.team_id === p[3] || c.team_id === '');
        if (!list.length) return this.#answer(res, 404, NOT_FOUND);
        const text = JSON.stringify(list);
        this.channelListBytes = Buffer.byteLength(text);
        res.writeHead(200, { 'content-type': 'application/json', ...this.#date(res) }).end(text);
        return;
      }
      case 'myChannels':
        return this.#streamChannels(res, url.searchParams);
      case 'since':
        if (!this.viewArchivedChannels && this.#channel(p[1]!)?.delete_at)
          return this.#error(res, 403, 'api.user.view_archived_channels.get_posts_for_channel.app_error', 'You cannot view archived channels.');
        return this.#answer(res, 200, postsPage(this.posts, p[1]!, url.searchParams));
      case 'create': {
        const channel = this.#channel(String(body?.channel_id ?? ''));
        const message = String(body?.message ?? '');
        if (!channel) return this.#error(res, 403, 'api.context.permissions.app_error', 'You do not have the appropriate permissions.');
        if (!message || message.length > 16_383) return this.#error(res, 400, 'model.post.is_valid.msg.app_error', 'Invalid message');
        const pending = typeof body?.pending_post_id === 'string' ? body.pending_post_id : undefined;
        const seen = pending ? [...this.posts.values()].find((x) => x.pending_post_id === pending) : undefined;
        if (seen) return this.#answer(res, 201, seen);
        const post = this.#store(
          this.bot.id,
          channel.id,
          String(body?.root_id ?? ''),
          message,
          { from_bot: 'true' },
          pending ? { pending_post_id: pending } : {},
        );
        this.broadcast(this.postedEvent(post, this.bot.username));
        return this.#answer(res, 201, post);
      }
      case 'patch': {
        const post = this.posts.get(p[1]!);
        if (!post || post.delete_at) return this.#error(res, 404, 'app.post.get.app_error', 'Unable to get the post.');
        if (typeof body?.message === 'string') {
          if (body.message.length > 16_383) return this.#error(res, 400, 'model.post.is_valid.msg.app_error', 'Invalid message');
          post.message = body.message;
          post.edits++;
          post.edit_at = post.update_at = this.#nowMs();
        }
        return this.#answer(res, 200, post);
      }
      case 'delete': {
        const post = this.posts.get(p[1]!);
        if (!post) return this.#error(res, 404, 'app.post.get.app_error', 'Unable to get the post.');
        post.delete_at = this.#nowMs();
        return this.#answer(res, 200, { status: 'OK' });
      }
      case 'typing':
        return this.#answer(res, 200, { status: 'OK' });
      case 'file': {
        const bytes = this.files.get(p[1]!);
        if (!bytes) return this.#error(res, 404, 'app.file_info.get.app_error', 'Unable to get the file info.');
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': bytes.length }).end(bytes);
        return;
      }
    }
  }
}
