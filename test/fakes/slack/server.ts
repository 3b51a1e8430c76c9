import { createHmac } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import { streamMethod, type SlackTask } from './streams.js';

/** A method's next answer: a platform error, an HTTP status, a delay or a hold, or none at all (`hang`: the request is never answered). */
export type SlackFault =
  | { error: string }
  | { status: 429; retryAfter: number }
  | { status: 500 | 502 }
  /** An answer that is not the Web API's: this status with this raw body (a proxy's error page). */
  | { status: number; raw: string }
  | { delayMs: number }
  /** Answered as usual once `until` settles (a test releases it: no timing involved). */
  | { until: Promise<unknown> }
  | { hang: true };

export interface ApiCall {
  method: string;
  args: Record<string, string>;
  token: string | undefined;
  at: number;
}

export interface SlackMessage {
  channel: string;
  ts: string;
  threadTs?: string;
  text: string;
  deleted: boolean;
  edits: number;
  /** Set for messages written through chat.startStream/appendStream/stopStream: the text each call appended. */
  stream?: { chunks: string[]; stopped: boolean };
  /** The tasks task_update chunks showed in a streamed message, in the order they first came, each as its last update left it. */
  tasks?: SlackTask[];
  /** Block Kit blocks as posted; chat.update with `blocks` replaces them. */
  blocks?: Array<{ type: string; elements?: Array<{ type: string; action_id: string; text: { text: string }; value?: string }> }>;
  /** Posted or last updated with `markdown_text` (standard Markdown) rather than mrkdwn `text`. */
  markdown?: boolean;
}

interface Envelope {
  envelope_id: string;
  type: 'events_api' | 'interactive';
  accepts_response_payload: boolean;
  retry_attempt: number;
  retry_reason: string;
  payload: Record<string, unknown> | null;
}

export const BOT_USER = 'UBOT0001';

/** Slack's Block Kit checks we rely on: known block types; buttons with action_id ≤ 255, label ≤ 75, value ≤ 2000. */
function blocksValid(blocks: unknown): boolean {
  if (!Array.isArray(blocks) || blocks.length > 50) return false;
  return blocks.every(
    (b: { type?: string; elements?: Array<{ type?: string; action_id?: string; text?: { type?: string; text?: string }; value?: string }> }) => {
      if (b.type === 'section') return true;
      if (b.type !== 'actions' || !Array.isArray(b.elements) || b.elements.length > 25) return false;
      return b.elements.every(
        (e) =>
          e.type === 'button' &&
          !!e.action_id &&
          e.action_id.length <= 255 &&
          e.text?.type === 'plain_text' &&
          (e.text.text ?? '').length <= 75 &&
          (e.value ?? '').length <= 2000,
      );
    },
  );
}
export const TEAM = 'T0001';

/** Signs an HTTP-mode request body the way Slack does (v0 HMAC-SHA256). */
export function signSlack(body: string, secret: string, timestampS = Math.floor(Date.now() / 1000)): Record<string, string> {
  const sig = `v0=${createHmac('sha256', secret).update(`v0:${timestampS}:${body}`).digest('hex')}`;
  return { 'x-slack-signature': sig, 'x-slack-request-timestamp': String(timestampS), 'content-type': 'application/json' };
}

/**
 * Slack on 127.0.0.1: the Web API over form-encoded POST (auth.test, apps.connections.open,
 * chat.postMessage/update/delete, chat.startStream/appendStream/stopStream with markdown_text
 * or chunks: test/fakes/slack/streams.ts) and a Socket
 * Mode WebSocket server (hello, events_api envelopes, ack tracking, redelivery of unacked
 * envelopes on the next connection, disconnect). Faults per method; a call log.
 */
export class FakeSlack {
  readonly calls: ApiCall[] = [];
  readonly messages: SlackMessage[] = [];
  /** Accept `markdown_text` on chat.postMessage/update. Off by default: an older API that answers it with no_text. */
  markdownText = false;
  /** When set, every call carrying `markdown_text` gets this raw answer (a Slack-compatible server failing the argument). */
  markdownTextAnswer: { status: number; raw: string } | undefined;
  /**
   * chat.update on a message whose stream was never stopped is refused (cant_update_message):
   * Slack does not document editing an active stream, so a client must not rely on it. Off by default.
   */
  refuseUpdateWhileStreaming = false;
  /**
   * When set, every stream call carrying `chunks` (chat.startStream/appendStream/stopStream) gets this
   * error: a workspace or an older API that does not take them (`invalid_arguments`, or `no_text`
   * where `markdown_text` is still required). Malformed chunks are refused with `invalid_arguments` regardless.
   */
  refuseChunks: string | undefined;
  /** The bot's reactions, by `channel:ts` of the reacted message. */
  readonly reactions = new Map<string, string[]>();
  readonly acks = new Map<string, number>();
  readonly sentEnvelopes: Array<{ id: string; at: number; socket: number }> = [];
  /** Every ack, in order: an envelope acked twice shows twice. */
  readonly ackLog: Array<{ id: string; socket: number; at: number }> = [];
  /** Socket Mode connections opening and closing (with the close code), numbered from 1 in the order they opened. */
  readonly socketLog: Array<{ socket: number; event: 'open' | 'close'; at: number; code?: number }> = [];
  /**
   * How envelopes are spread over open sockets: `all` (default) sends each to every one;
   * `one` sends each to one socket (the oldest open, as a long-lived connection would get
   * it) and, when a socket closes, what it left unacked goes to an open one (Slack's retry).
   */
  spread: 'all' | 'one' = 'all';
  connections = 0;
  readonly #open = new Map<WebSocket, number>();
  url = '';
  #unacked = new Map<string, Envelope>();
  /** The socket each envelope went out on last: Slack retries on another socket only what the closed one was given. */
  readonly #sentOn = new Map<string, WebSocket>();
  /** Every envelope pushed, for redeliver(). */
  readonly #envelopes = new Map<string, Envelope>();
  #seq = 0;
  readonly #faults = new Map<string, SlackFault[]>();
  readonly #http: Server;
  readonly #wss: WebSocketServer;

  constructor(
    readonly botToken = 'xoxb-1111-2222-fakebottoken',
    readonly appToken = 'xapp-1-A0001-3333-fakeapptoken',
  ) {
    this.#http = createServer((req, res) => void this.#handle(req, res));
    this.#wss = new WebSocketServer({ server: this.#http, path: '/link' });
    this.#wss.on('connection', (ws) => this.#connection(ws));
  }

  async start(): Promise<string> {
    await new Promise<void>((r) => this.#http.listen(0, '127.0.0.1', () => r()));
    this.url = `http://127.0.0.1:${(this.#http.address() as AddressInfo).port}`;
    return this.url;
  }

  get apiUrl(): string {
    return `${this.url}/api/`;
  }

  async close(): Promise<void> {
    for (const ws of this.#wss.clients) ws.terminate();
    await new Promise<void>((r) => this.#wss.close(() => r()));
    this.#http.closeAllConnections();
    await new Promise<void>((r) => this.#http.close(() => r()));
  }

  fail(method: string, fault: SlackFault, times = 1): void {
    this.#faults.set(method, [...(this.#faults.get(method) ?? []), ...Array<SlackFault>(times).fill(fault)]);
  }

  callsOf(method: string): ApiCall[] {
    return this.calls.filter((c) => c.method === method);
  }

  /** Final texts of the bot's live messages in a channel (and thread), in order. */
  texts(channel: string, threadTs?: string): string[] {
    return this.messages.filter((m) => m.channel === channel && !m.deleted && (threadTs === undefined || m.threadTs === threadTs)).map((m) => m.text);
  }

  /** Envelopes sent (or waiting for a connection) that the client has not acked yet. */
  get unacked(): number {
    return this.#unacked.size;
  }

  get socketOpen(): boolean {
    return [...this.#wss.clients].some((c) => c.readyState === 1);
  }

  /** The numbers of the Socket Mode connections open now (not closing). */
  get openSockets(): number[] {
    return [...this.#open].filter(([ws]) => ws.readyState === 1).map(([, n]) => n);
  }

  #ts(): string {
    return `${Math.floor(Date.now() / 1000)}.${String(++this.#seq).padStart(6, '0')}`;
  }

  // ——— users, through Socket Mode ———

  /** The event as Slack would send it to an HTTP endpoint (event_callback). */
  callback(event: Record<string, unknown>): Record<string, unknown> {
    return {
      token: 'verification-token',
      team_id: TEAM,
      api_app_id: 'A0001',
      event,
      type: 'event_callback',
      event_id: `Ev${++this.#seq}`,
      event_time: Math.floor(Date.now() / 1000),
      authorizations: [{ team_id: TEAM, user_id: BOT_USER, is_bot: true }],
    };
  }

  dmEvent(text: string, user = 'U0USER1', threadTs?: string): Record<string, unknown> {
    const ts = this.#ts();
    return { type: 'message', channel: 'D0DM0001', channel_type: 'im', user, text, ts, event_ts: ts, team: TEAM, ...(threadTs ? { thread_ts: threadTs } : {}) };
  }

  readonly #files = new Map<string, Buffer>();
  /** url_private paths downloaded, with whether the bot token came as `Authorization: Bearer`. */
  readonly fileDownloads: Array<{ path: string; authorized: boolean }> = [];

  /** A DM sharing one file (subtype file_share), its url_private served by this fake with the bot token only. */
  dmFileEvent(
    text: string,
    file: { bytes: Buffer; name: string; mimetype: string; filetype: string; size?: number },
    user = 'U0USER1',
  ): Record<string, unknown> {
    const id = `F0${String(++this.#seq).padStart(8, '0')}`;
    const path = `/files-pri/${TEAM}-${id}/${file.name}`;
    this.#files.set(path, file.bytes);
    const f = {
      id,
      name: file.name,
      title: file.name,
      mimetype: file.mimetype,
      filetype: file.filetype,
      size: file.size ?? file.bytes.length,
      mode: 'hosted',
      is_external: false,
      url_private: `${this.url}${path}`,
      url_private_download: `${this.url}${path.replace('/files-pri/', '/files-pri-dl/')}`,
    };
    return { ...this.dmEvent(text, user), subtype: 'file_share', files: [f], upload: false };
  }

  /** url_private(_download): the bytes for the bot token; anyone else is sent to the sign-in page, as Slack does. */
  #serveFile(req: IncomingMessage, res: ServerResponse): boolean {
    const url = (req.url ?? '').split('?')[0]!;
    if (url === '/signin') return (void res.writeHead(200, { 'content-type': 'text/html' }).end('<html>Sign in to Slack</html>'), true);
    if (!url.startsWith('/files-pri')) return false;
    const path = url.replace('/files-pri-dl/', '/files-pri/');
    const authorized = req.headers.authorization === `Bearer ${this.botToken}`;
    this.fileDownloads.push({ path, authorized });
    const bytes = this.#files.get(path);
    if (!authorized) return (void res.writeHead(302, { location: '/signin' }).end(), true);
    if (!bytes) return (void res.writeHead(404, { 'content-type': 'text/plain' }).end('file_not_found'), true);
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(bytes.length) }).end(bytes);
    return true;
  }

  mentionEvent(text: string, o: { channel?: string; threadTs?: string; user?: string } = {}): Record<string, unknown> {
    const ts = this.#ts();
    return {
      type: 'app_mention',
      channel: o.channel ?? 'C0CHAN001',
      user: o.user ?? 'U0USER1',
      text: `<@${BOT_USER}> ${text}`,
      ts,
      event_ts: ts,
      team: TEAM,
      ...(o.threadTs ? { thread_ts: o.threadTs } : {}),
    };
  }

  /** Sends an event over Socket Mode (or keeps it for the next connection); returns the envelope id. */
  push(event: Record<string, unknown>): string {
    return this.pushPayload(this.callback(event));
  }

  /** Sends any payload in an events_api envelope, malformed ones too (a `null`, an `event: null`). */
  pushPayload(payload: Record<string, unknown> | null): string {
    const envelope: Envelope = {
      envelope_id: `env-${++this.#seq}`,
      type: 'events_api',
      accepts_response_payload: false,
      retry_attempt: 0,
      retry_reason: '',
      payload,
    };
    this.#unacked.set(envelope.envelope_id, envelope);
    this.#envelopes.set(envelope.envelope_id, envelope);
    this.#spread(envelope);
    return envelope.envelope_id;
  }

  /** Sends an envelope again, acked or not, as Slack does when it did not get the ack in time (retry_attempt raised). */
  redeliver(id: string): void {
    const env = this.#envelopes.get(id);
    if (!env) throw new Error(`no envelope ${id}`);
    const again = { ...env, retry_attempt: env.retry_attempt + 1, retry_reason: 'timeout' };
    this.#envelopes.set(id, again);
    this.#unacked.set(id, again);
    this.#spread(again);
  }

  #spread(envelope: Envelope): void {
    const open = [...this.#open.keys()].filter((ws) => ws.readyState === 1);
    for (const ws of this.spread === 'one' ? open.slice(0, 1) : open) this.#send(ws, envelope);
  }

  #send(ws: WebSocket, envelope: Envelope): void {
    this.#sentOn.set(envelope.envelope_id, ws);
    this.sentEnvelopes.push({ id: envelope.envelope_id, at: Date.now(), socket: this.#open.get(ws) ?? 0 });
    ws.send(JSON.stringify(envelope));
  }

  /**
   * A user clicks a Block Kit button on one of the bot's messages: a block_actions payload in
   * an `interactive` Socket Mode envelope, which the app must ack.
   */
  click(message: SlackMessage, label: string, user = 'U0USER1'): string {
    const payload = this.blockActions(message, label, user);
    const envelope: Envelope = {
      envelope_id: `env-${++this.#seq}`,
      type: 'interactive',
      accepts_response_payload: true,
      retry_attempt: 0,
      retry_reason: '',
      payload,
    };
    this.#unacked.set(envelope.envelope_id, envelope);
    this.#envelopes.set(envelope.envelope_id, envelope);
    this.#spread(envelope);
    return envelope.envelope_id;
  }

  /** The block_actions payload of a click (HTTP mode posts it form-encoded as `payload`). */
  blockActions(message: SlackMessage, label: string, user = 'U0USER1'): Record<string, unknown> {
    const button = message.blocks?.flatMap((b) => (b.type === 'actions' ? (b.elements ?? []) : [])).find((e) => e.type === 'button' && e.text.text === label);
    if (!button) throw new Error(`message ${message.ts} has no button "${label}"`);
    return {
      type: 'block_actions',
      user: { id: user, username: user.toLowerCase(), name: user.toLowerCase(), team_id: TEAM },
      api_app_id: 'A0001',
      token: 'verification-token',
      container: {
        type: 'message',
        message_ts: message.ts,
        channel_id: message.channel,
        is_ephemeral: false,
        ...(message.threadTs ? { thread_ts: message.threadTs } : {}),
      },
      trigger_id: `trigger-${++this.#seq}`,
      team: { id: TEAM, domain: 'fake' },
      channel: { id: message.channel, name: message.channel.startsWith('D') ? 'directmessage' : 'general' },
      message: {
        type: 'message',
        user: BOT_USER,
        ts: message.ts,
        text: message.text,
        blocks: message.blocks,
        ...(message.threadTs ? { thread_ts: message.threadTs } : {}),
      },
      response_url: `${this.url}/actions/response`,
      actions: [
        {
          type: 'button',
          action_id: button.action_id,
          block_id: 'b1',
          text: { type: 'plain_text', text: label },
          value: button.value,
          action_ts: `${Date.now() / 1000}`,
        },
      ],
    };
  }

  /** One text frame of exactly `bytes` bytes (JSON, not an envelope, so nothing waits for its ack) on every open socket. */
  sendFrame(bytes: number): void {
    const head = '{"type":"padding","text":"';
    const frame = `${head}${'x'.repeat(Math.max(0, bytes - head.length - 2))}"}`;
    for (const ws of this.#wss.clients) if (ws.readyState === 1) ws.send(frame);
  }

  /** Slack's refresh: {"type":"disconnect"}; the client must reconnect through apps.connections.open. */
  disconnect(reason = 'refresh_requested'): void {
    for (const ws of this.#wss.clients) ws.send(JSON.stringify({ type: 'disconnect', reason, debug_info: { host: 'fake' } }));
  }

  #connection(ws: WebSocket): void {
    const socket = ++this.connections;
    this.#open.set(ws, socket);
    this.socketLog.push({ socket, event: 'open', at: Date.now() });
    ws.send(
      JSON.stringify({
        type: 'hello',
        num_connections: 1,
        debug_info: { host: 'fake-slack', approximate_connection_time: 3600 },
        connection_info: { app_id: 'A0001' },
      }),
    );
    // Slack sends again what was never acked, with retry_attempt raised; spreading to one
    // socket, not what is out on another open socket (that one may still ack it).
    const inFlight = (env: Envelope) => this.spread === 'one' && this.#sentOn.get(env.envelope_id)?.readyState === 1;
    for (const env of this.#unacked.values()) if (!inFlight(env)) this.#send(ws, { ...env, retry_attempt: env.retry_attempt + 1, retry_reason: 'timeout' });
    const ping = setInterval(() => ws.ping(), 5000);
    ws.on('close', (code) => {
      clearInterval(ping);
      this.#open.delete(ws);
      this.socketLog.push({ socket, event: 'close', at: Date.now(), code });
      // Slack retries what a closed socket left unacked on another open one: what it was
      // given, not an envelope that went to another socket while this one was closing.
      if (this.spread === 'one')
        for (const env of this.#unacked.values())
          if (this.#sentOn.get(env.envelope_id) === ws) this.#spread({ ...env, retry_attempt: env.retry_attempt + 1, retry_reason: 'timeout' });
    });
    ws.on('message', (raw) => {
      const m = JSON.parse(String(raw)) as { envelope_id?: string };
      if (m.envelope_id) {
        this.ackLog.push({ id: m.envelope_id, socket, at: Date.now() });
        this.acks.set(m.envelope_id, Date.now());
        this.#unacked.delete(m.envelope_id);
      }
    });
  }

  // ——— Web API ———

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method === 'GET' && this.#serveFile(req, res)) return;
    const method = /^\/api\/([\w.]+)/.exec(req.url ?? '')?.[1];
    let raw = '';
    for await (const c of req) raw += String(c);
    const args = Object.fromEntries(new URLSearchParams(raw)) as Record<string, string>;
    const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? args.token;
    const json = (status: number, body: unknown, headers: Record<string, string> = {}): void =>
      void res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
    const ok = (body: Record<string, unknown> = {}) => json(200, { ok: true, ...body });
    const no = (error: string) => json(200, { ok: false, error });
    if (!method) return json(404, { ok: false, error: 'unknown_method' });
    this.calls.push({ method, args, token, at: Date.now() });
    const rawAnswer = (a: { status: number; raw: string }) => void res.writeHead(a.status, { 'content-type': 'text/html' }).end(a.raw);
    if (this.markdownTextAnswer && args.markdown_text !== undefined && method.startsWith('chat.') && !method.endsWith('Stream'))
      return rawAnswer(this.markdownTextAnswer);
    const fault = this.#faults.get(method)?.shift();
    if (fault) {
      // Left open until the client gives up or close() drops the connection.
      if ('hang' in fault) return;
      if ('raw' in fault) return rawAnswer(fault);
      if ('until' in fault) await fault.until.catch(() => {});
      else if ('delayMs' in fault) await new Promise((r) => setTimeout(r, fault.delayMs));
      else if ('error' in fault) return no(fault.error);
      else if (fault.status === 429) return json(429, { ok: false, error: 'ratelimited' }, { 'retry-after': String(fault.retryAfter) });
      else return json(fault.status, { ok: false, error: 'fatal_error' });
    }
    if (method === 'apps.connections.open') {
      if (token !== this.appToken) return no('invalid_auth');
      return ok({ url: `${this.url.replace('http', 'ws')}/link?ticket=t${++this.#seq}&app_id=A0001` });
    }
    if (token !== this.botToken) return no('invalid_auth');
    const find = () => this.messages.find((m) => m.channel === args.channel && m.ts === args.ts && !m.deleted);
    switch (method) {
      case 'auth.test':
        return ok({
          url: 'https://fake.slack.com/',
          team: 'Fake',
          user: 'channeld',
          team_id: TEAM,
          user_id: BOT_USER,
          bot_id: 'B0001',
          is_enterprise_install: false,
        });
      case 'chat.postMessage': {
        if (!args.channel) return no('channel_not_found');
        const md = this.markdownText && args.markdown_text ? args.markdown_text : undefined;
        if (md && (args.text || args.blocks)) return no('markdown_text_conflict');
        if (!md && !args.text && !args.blocks) return no('no_text');
        const blocks = args.blocks ? (JSON.parse(args.blocks) as SlackMessage['blocks']) : undefined;
        if (blocks && !blocksValid(blocks)) return no('invalid_blocks');
        const msg: SlackMessage = {
          channel: args.channel,
          ts: this.#ts(),
          text: md ?? args.text ?? '',
          deleted: false,
          edits: 0,
          ...(md ? { markdown: true } : {}),
          ...(args.thread_ts ? { threadTs: args.thread_ts } : {}),
          ...(blocks?.length ? { blocks } : {}),
        };
        this.messages.push(msg);
        return ok({ channel: msg.channel, ts: msg.ts, message: { text: msg.text, ts: msg.ts, user: BOT_USER, bot_id: 'B0001' } });
      }
      case 'chat.update': {
        const msg = find();
        if (!msg) return no('message_not_found');
        if (this.refuseUpdateWhileStreaming && msg.stream && !msg.stream.stopped) return no('cant_update_message');
        const md = this.markdownText && args.markdown_text ? args.markdown_text : undefined;
        if (!md && !args.text && !args.blocks) return no('no_text');
        if (args.blocks) {
          const blocks = JSON.parse(args.blocks) as NonNullable<SlackMessage['blocks']>;
          if (!blocksValid(blocks)) return no('invalid_blocks');
          msg.blocks = blocks;
        }
        msg.text = md ?? args.text ?? '';
        if (md) msg.markdown = true;
        else delete msg.markdown;
        msg.edits++;
        return ok({ channel: msg.channel, ts: msg.ts, text: msg.text });
      }
      case 'chat.delete': {
        const msg = find();
        if (!msg) return no('message_not_found');
        msg.deleted = true;
        return ok({ channel: msg.channel, ts: msg.ts });
      }
      case 'reactions.add':
      case 'reactions.remove': {
        if (!args.channel || !args.timestamp || !args.name) return no('invalid_arguments');
        const key = `${args.channel}:${args.timestamp}`;
        const list = this.reactions.get(key) ?? [];
        const has = list.includes(args.name);
        if (method === 'reactions.add' && has) return no('already_reacted');
        if (method === 'reactions.remove' && !has) return no('no_reaction');
        this.reactions.set(key, method === 'reactions.add' ? [...list, args.name] : list.filter((n) => n !== args.name));
        return ok();
      }
      case 'chat.startStream':
      case 'chat.appendStream':
      case 'chat.stopStream': {
        const answer = streamMethod({ messages: this.messages, ts: () => this.#ts(), refuseChunks: this.refuseChunks }, method, args);
        return 'error' in answer ? no(answer.error) : ok(answer.ok);
      }
      default:
        return no('unknown_method');
    }
  }
}
