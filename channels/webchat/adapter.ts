import { createHmac, randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import type { ChannelAdapter, ChannelCapabilities, Deliver, RelayedReply, StorageReporter, TransportOptions } from '../../src/contracts/channel.js';
import { join } from 'node:path';
import type { Attachment, MessageRef, ReplyTarget } from '../../src/contracts/message.js';
import { isLoopbackClient, refuseUpgrade, secretEquals } from '../../src/util/http-helpers.js';
import type { HttpRoutes, RouteHandler } from '../../src/contracts/http.js';
import type { Logger } from 'pino';
import { untilAborted } from '../../src/util/abortable.js';
import { buttonsFrame, parseClientFrame, type ServerFrame } from './protocol.js';
import { backlogFrame, handedTabs, mergeBacklog, tabsToHandOver, type BacklogEntry, type TabBacklog } from './handover.js';
import { storedKey } from './id-key.js';
import { assets, servePage } from './page-route.js';
import { Uploads } from './uploads.js';
import { startHeartbeat } from './heartbeat.js';
import { answerConnectCheck, DEFAULT_SOCKET_CAPS, SocketLimit, type SocketCaps } from './socket-caps.js';

/** Messages and replies kept per tab, in order, so a reloaded tab sees both sides of the conversation. */
const BACKLOG = 100;
const MAX_TEXT = 16_000;
/** Frames of one socket waiting for the one before them to be stored. */
const MAX_WAITING_FRAMES = 64;
const TOO_MANY = 'too many messages are waiting to be taken; send this one again shortly';
interface Tab {
  sockets: Set<WebSocket>;
  /** Keyed `user:<id>` or `bot:<ref>`; an edited reply keeps its place. */
  backlog: Map<string, BacklogEntry>;
  lastSeenMs: number;
}

export interface WebchatOptions {
  id: string;
  http: HttpRoutes;
  log: Logger;
  /** When set, clients must present it; otherwise only loopback clients are accepted. */
  accessToken?: string;
  /** Uploads are kept under `<stateDir>/uploads/<id>`. */
  stateDir: string;
  maxAttachmentBytes: () => number;
  /** Tabs whose backlog is kept, and the bytes all backlogs may hold; least recently used closed tabs go first. */
  backlogMaxTabs?: number;
  backlogMaxBytes?: number;
  /** Bytes all kept uploads may hold together (a quarter per tab). */
  uploadQuotaBytes?: number;
  /** Told how many kept replies were evicted to stay within the bounds. */
  onEvict?: (count: number) => void;
  /** Told of uploads refused for lack of room (the daemon's storage health). */
  storage?: StorageReporter;
  /** Every socket is pinged this often; one that answered none of two pings is dropped (a half-open tab). */
  heartbeatMs?: number;
  /** Sockets open at once, per tab and in all (DEFAULT_SOCKET_CAPS); more are refused with 429. */
  socketCaps?: SocketCaps;
}

/** About what a kept reply costs: its text (UTF-16) plus the entry around it. */
const replyBytes = (text: string) => 2 * text.length + 256;

/** The local web chat: a page and a WebSocket on the daemon's HTTP server; each tab is a conversation. */
export class WebchatAdapter implements ChannelAdapter {
  readonly capabilities: ChannelCapabilities = {
    maxMessageLength: 8000,
    editsDrafts: true,
    minEditIntervalMs: 100,
    nativeStream: false,
    typing: true,
    typingRefreshMs: 3000,
  };
  readonly selfId = 'channeld';
  readonly selfName = 'channeld';
  readonly #o: WebchatOptions;
  /** Least recently used first (a tab is re-inserted when it connects or sends). */
  readonly #tabs = new Map<string, Tab>();
  readonly #uploads: Uploads;
  #backlogBytes = 0;
  /** Keys the sender ids: the access token when set, else a key kept in the state dir, so an id outlives a restart. */
  readonly #idKey: string;
  /**
   * Upgrade, the old process: set once the tabs were handed over; the tabs that turns still
   * running here answered since, each with the reply keys they deleted.
   */
  #late: Map<string, Set<string>> | undefined;

  constructor(options: WebchatOptions) {
    this.#o = options;
    const quota = options.uploadQuotaBytes ?? 256 * 1024 * 1024;
    this.#uploads = new Uploads(join(options.stateDir, 'uploads', options.id), options.maxAttachmentBytes, () => quota, options.storage);
    this.#idKey = options.accessToken ?? storedKey(join(options.stateDir, 'webchat', `${options.id}.key`));
  }

  /** An upload's bytes, read back from the state dir. */
  download(a: Attachment, o: { maxBytes: number }): Promise<Buffer> {
    return this.#uploads.read(a, o.maxBytes);
  }

  get id(): string {
    return this.#o.id;
  }

  /**
   * The sender id of a tab: made by the server from the tab and a key the client never sees,
   * so no client can claim an id (one listed in `approvers` or `admins`) by naming its tab.
   */
  senderIdOf(tabId: string): string {
    return `web-${createHmac('sha256', this.#idKey).update(tabId).digest('hex').slice(0, 16)}`;
  }

  #authorized(req: IncomingMessage, url: URL): boolean {
    if (this.#o.accessToken === undefined) return isLoopbackClient(req);
    const given = url.searchParams.get('token') ?? /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '';
    return secretEquals(given, this.#o.accessToken);
  }

  async listen(deliver: Deliver, signal: AbortSignal, onConnected: () => void): Promise<void> {
    const wss = new WebSocketServer({ noServer: true, maxPayload: 64 * 1024 });
    const limit = new SocketLimit(this.#o.socketCaps ?? DEFAULT_SOCKET_CAPS, this.#o.log, this.#o.id, signal);
    const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer, url: URL) => {
      if (!this.#authorized(req, url)) return refuseUpgrade(socket, '401 Unauthorized');
      const tabId = (url.searchParams.get('tab') ?? '').slice(0, 64) || randomUUID();
      if (!limit.admit(socket, this.#tabs.get(tabId)?.sockets.size ?? 0, wss.clients.size)) return;
      wss.handleUpgrade(req, socket, head, (ws) => this.#attach(ws, tabId, deliver));
    };
    const check: RouteHandler = (req, res, url) => {
      const tabSockets = this.#tabs.get((url.searchParams.get('tab') ?? '').slice(0, 64))?.sockets.size ?? 0;
      const may = { ownOrigin: this.#o.http.ownOrigin(req), authorized: this.#authorized(req, url), hasToken: this.#o.accessToken !== undefined };
      answerConnectCheck(req, res, may, limit.refusal(tabSockets, wss.clients.size));
    };
    // The first web chat to start also answers on `/` and `/chat`; every one has `/webchat/<id>`.
    const primary = !this.#o.http.has('GET', '/');
    const serve: RouteHandler = (req, res) => servePage(req, res, this.#o.id, this.#o.accessToken !== undefined);
    const upload: RouteHandler = (req, res, url) =>
      this.#uploads.receive(req, res, (url.searchParams.get('tab') ?? '').slice(0, 64), {
        ownOrigin: this.#o.http.ownOrigin(req),
        authorized: this.#authorized(req, url),
      });
    const disposers = [
      this.#o.http.route('POST', `/webchat/${this.#o.id}/upload`, upload),
      this.#o.http.upgrade(`/chat/${this.#o.id}`, onUpgrade),
      this.#o.http.route('GET', `/webchat/${this.#o.id}`, serve),
      this.#o.http.route('POST', `/webchat/${this.#o.id}/connect-check`, check),
      ...Object.entries(assets).map(([name, a]) =>
        this.#o.http.route('GET', `/webchat/${this.#o.id}/assets/${name}`, (_req, res) => {
          res.writeHead(200, { 'content-type': a.type, 'cache-control': 'no-cache', 'x-content-type-options': 'nosniff' }).end(a.body);
        }),
      ),
      ...(primary ? [this.#o.http.upgrade('/chat', onUpgrade), this.#o.http.route('GET', '/', serve)] : []),
    ];
    const heartbeat = startHeartbeat(wss, this.#o.heartbeatMs ?? 30_000);
    onConnected();
    // After the channel is up: old uploads never hold back the start.
    await this.#uploads.prune().catch((err: unknown) => this.#o.log.warn({ err }, 'old web chat uploads not pruned'));
    await untilAborted(signal);
    heartbeat();
    for (const dispose of disposers.reverse()) dispose();
    for (const ws of wss.clients) ws.close(1001, 'channel stopping');
    await new Promise<void>((resolve) => wss.close(() => resolve()));
    // Handed over: the tabs stay, so what turns still running here answer is kept with its
    // conversation and goes to the new process once they ended (lateHandoverState).
    if (this.#late) return;
    this.#tabs.clear();
    this.#backlogBytes = 0;
  }

  #attach(ws: WebSocket, tabId: string, deliver: Deliver): void {
    const tab = this.#tabs.get(tabId) ?? { sockets: new Set(), backlog: new Map(), lastSeenMs: Date.now() };
    this.#touch(tabId, tab);
    tab.sockets.add(ws);
    this.#enforceBounds();
    for (const [key, e] of tab.backlog) ws.send(JSON.stringify(backlogFrame(key, e)));
    // One message at a time per socket: an upload lookup must not let a later message pass.
    // A message waits until it is stored (minutes while storage is down), so what may wait
    // behind it is bounded.
    let order: Promise<void> = Promise.resolve();
    let waiting = 0;
    ws.on('message', (data) => {
      if (waiting >= MAX_WAITING_FRAMES) {
        // Named: the page marks that message refused instead of sending it again on its own.
        const id = parseClientFrame(String(data))?.id;
        return ws.send(JSON.stringify({ type: 'error', message: TOO_MANY, ...(id ? { id } : {}) } satisfies ServerFrame));
      }
      waiting++;
      order = order
        .then(() => onMessage(data))
        .catch((err: unknown) => this.#o.log.warn({ err, channel: this.#o.id }, 'web chat frame failed'))
        .finally(() => waiting--);
    });
    const onMessage = async (data: import('ws').RawData): Promise<void> => {
      const frame = parseClientFrame(String(data));
      if (!frame)
        return ws.send(JSON.stringify({ type: 'error', message: 'unreadable frame: send {"type":"message","id":"...","text":"..."}' } satisfies ServerFrame));
      const text = frame.text.slice(0, MAX_TEXT);
      const attachments = frame.attachments ? await this.#uploads.describe(frame.attachments) : [];
      // A file alone (an image without a caption) is a message too.
      if (!text.trim() && !attachments.length) return;
      tab.lastSeenMs = Date.now();
      this.#touch(tabId, tab);
      // Kept before the turn starts, so the reply always comes after it in a replayed backlog.
      if (!tab.backlog.has(`user:${frame.id}`)) {
        this.#keep(tab, `user:${frame.id}`, { from: 'user', id: frame.id, text });
        const echo = JSON.stringify({ type: 'message', id: frame.id, text } satisfies ServerFrame);
        for (const other of tab.sockets) if (other !== ws && other.readyState === other.OPEN) other.send(echo);
      }
      try {
        await deliver({
          channelId: this.#o.id,
          kind: 'webchat',
          messageId: `${tabId}:${frame.id}`,
          chat: { id: tabId, type: 'dm' },
          sender: { id: this.senderIdOf(tabId), name: 'web user', isBot: false },
          text,
          attachments,
          addressed: true,
          receivedAt: Date.now(),
        });
        ws.send(JSON.stringify({ type: 'ack', id: frame.id } satisfies ServerFrame));
      } catch (err) {
        this.#o.log.warn({ err, channel: this.#o.id }, 'web chat message not stored');
        ws.send(JSON.stringify({ type: 'error', id: frame.id, message: 'the daemon could not take this message; try again' } satisfies ServerFrame));
      }
    };
    ws.on('close', () => {
      tab.sockets.delete(ws);
      this.#evictIdleTabs();
    });
    ws.on('error', () => ws.terminate());
  }

  #touch(tabId: string, tab: Tab): void {
    this.#tabs.delete(tabId);
    this.#tabs.set(tabId, tab);
  }

  #evictIdleTabs(): void {
    const cutoff = Date.now() - 3_600_000;
    for (const [id, tab] of this.#tabs) if (tab.sockets.size === 0 && tab.lastSeenMs < cutoff) this.#forgetTab(id, tab);
  }

  #forgetTab(id: string, tab: Tab): number {
    for (const r of tab.backlog.values()) this.#backlogBytes -= replyBytes(r.text);
    this.#tabs.delete(id);
    return tab.backlog.size;
  }

  #forgetReply(tab: Tab, ref: string): void {
    const r = tab.backlog.get(ref);
    if (!r) return;
    this.#backlogBytes -= replyBytes(r.text);
    tab.backlog.delete(ref);
  }

  /**
   * Tab ids come from the browser, so the backlogs are bounded: past `backlogMaxTabs` or
   * `backlogMaxBytes`, the least recently used closed tabs are forgotten; if open tabs alone
   * are over the bytes, their oldest replies go.
   */
  #enforceBounds(): void {
    const maxTabs = this.#o.backlogMaxTabs ?? 200;
    const maxBytes = this.#o.backlogMaxBytes ?? 8 * 1024 * 1024;
    let evicted = 0;
    for (const [id, tab] of this.#tabs) {
      if (this.#tabs.size <= maxTabs && this.#backlogBytes <= maxBytes) break;
      if (tab.sockets.size === 0) evicted += this.#forgetTab(id, tab);
    }
    for (const tab of this.#tabs.values()) {
      while (this.#backlogBytes > maxBytes && tab.backlog.size) {
        this.#forgetReply(tab, tab.backlog.keys().next().value!);
        evicted++;
      }
    }
    if (evicted) this.#o.onEvict?.(evicted);
  }

  #broadcast(chatId: string, frame: ServerFrame): void {
    // A turn recovered after a restart can answer before its tab reconnects: keep the
    // reply in a backlog for it, replayed when the tab attaches (idle tabs are evicted).
    const tab = this.#tabs.get(chatId) ?? (frame.type === 'reply' ? { sockets: new Set<WebSocket>(), backlog: new Map(), lastSeenMs: Date.now() } : undefined);
    if (!tab) return;
    if (!this.#tabs.has(chatId)) this.#tabs.set(chatId, tab);
    if (frame.type === 'reply')
      this.#keep(tab, `bot:${frame.ref}`, { from: 'bot', text: frame.text, final: frame.final, ...(frame.buttons ? { buttons: frame.buttons } : {}) });
    if (frame.type === 'delete') this.#forgetReply(tab, `bot:${frame.ref}`);
    if (this.#late && (frame.type === 'reply' || frame.type === 'delete')) {
      const deleted = this.#late.get(chatId) ?? new Set<string>();
      if (frame.type === 'delete') deleted.add(`bot:${frame.ref}`);
      else deleted.delete(`bot:${frame.ref}`);
      this.#late.set(chatId, deleted);
    }
    sendToTab(tab, frame);
  }

  /** Adds or updates a backlog entry; an update keeps the entry's place, the oldest go past BACKLOG. */
  #keep(tab: Tab, key: string, entry: BacklogEntry): void {
    const old = tab.backlog.get(key);
    if (old) this.#backlogBytes -= replyBytes(old.text);
    tab.backlog.set(key, entry);
    this.#backlogBytes += replyBytes(entry.text);
    while (tab.backlog.size > BACKLOG) this.#forgetReply(tab, tab.backlog.keys().next().value!);
    this.#enforceBounds();
  }

  // The transport calls below only write to local sockets: nothing waits, so nothing to cut.
  async send(target: ReplyTarget, text: string, options: TransportOptions): Promise<MessageRef> {
    const ref = randomUUID();
    this.#broadcast(target.chatId, { type: 'reply', ref, text, final: options.final ?? false, ...buttonsFrame(options.buttons) });
    return { chatId: target.chatId, messageId: ref };
  }

  async edit(ref: MessageRef, text: string, options: TransportOptions): Promise<void> {
    this.#broadcast(ref.chatId, { type: 'reply', ref: ref.messageId, text, final: options.final ?? false });
  }

  async finalize(refs: readonly MessageRef[]): Promise<void> {
    this.#finalize(refs);
  }

  #finalize(refs: readonly MessageRef[]): void {
    for (const ref of refs) {
      const r = this.#tabs.get(ref.chatId)?.backlog.get(`bot:${ref.messageId}`);
      if (r?.from === 'bot' && !r.final) this.#broadcast(ref.chatId, { type: 'reply', ref: ref.messageId, text: r.text, final: true });
    }
  }

  async delete(ref: MessageRef): Promise<void> {
    this.#broadcast(ref.chatId, { type: 'delete', ref: ref.messageId });
  }

  async typing(target: ReplyTarget): Promise<void> {
    this.#broadcast(target.chatId, { type: 'typing' });
  }

  /**
   * Each tab's sockets are held by the instance the browser reached, while its turn runs
   * where its conversation is served: what that instance wrote (with the message ids it
   * made) comes here and goes to this instance's sockets and backlogs as if written here.
   */
  applyRelayed(reply: RelayedReply): void {
    // Synchronous, as the calls below are: a failure reaches the relay, which logs it.
    if (reply.op === 'send')
      this.#broadcast(reply.target.chatId, { type: 'reply', ref: reply.messageId, text: reply.text, final: reply.final, ...buttonsFrame(reply.buttons) });
    else if (reply.op === 'edit') this.#broadcast(reply.ref.chatId, { type: 'reply', ref: reply.ref.messageId, text: reply.text, final: reply.final });
    else if (reply.op === 'delete') this.#broadcast(reply.ref.chatId, { type: 'delete', ref: reply.ref.messageId });
    else if (reply.op === 'typing') this.#broadcast(reply.target.chatId, { type: 'typing' });
    else this.#finalize(reply.refs);
  }

  /**
   * Upgrade: the tabs' backlogs, read by the old process just before it closes their
   * sockets (web chat runs in both processes for a moment), so a tab that reconnects to the
   * new process finds its conversation there (channels/webchat/handover.ts bounds it).
   */
  handoverState(): unknown {
    this.#late ??= new Map();
    return tabsToHandOver([...this.#tabs]);
  }

  /** Upgrade, the old process once its turns ended: the tabs they answered after the hand-over, whole, with the replies they deleted. */
  lateHandoverState(): unknown {
    const late: Array<[string, TabBacklog]> = [];
    for (const [id, tab] of this.#tabs) {
      const deleted = this.#late?.get(id);
      if (deleted) late.push([id, { lastSeenMs: tab.lastSeenMs, backlog: tab.backlog, deleted }]);
    }
    return late.length ? tabsToHandOver(late) : undefined;
  }

  /**
   * Upgrade, in the new process: the old one's backlogs, merged into what a tab has here
   * (channels/webchat/handover.ts). What is new or changed also goes to the tab's open
   * sockets: an answer the old process finished after the tab reconnected here arrives once,
   * and a tab that already shows an entry is not sent it again.
   */
  resumeFrom(state: unknown): void {
    for (const handed of handedTabs(state)) {
      const tab = this.#tabs.get(handed.id) ?? { sockets: new Set(), backlog: new Map(), lastSeenMs: handed.lastSeenMs };
      this.#tabs.set(handed.id, tab);
      const { merged, changed } = mergeBacklog(tab.backlog, handed.backlog);
      for (const key of [...tab.backlog.keys()]) this.#forgetReply(tab, key);
      for (const [key, entry] of merged) this.#keep(tab, key, entry);
      const frames = changed.map(([key, entry]) => backlogFrame(key, entry));
      for (const key of handed.deleted ?? []) {
        if (!tab.backlog.has(key)) continue;
        this.#forgetReply(tab, key);
        frames.push({ type: 'delete', ref: key.slice(4) });
      }
      for (const frame of frames) sendToTab(tab, frame);
    }
  }

  /** Tabs and approximate backlog bytes held now. */
  get memory(): { tabs: number; backlogBytes: number } {
    return { tabs: this.#tabs.size, backlogBytes: this.#backlogBytes };
  }
}

/** A frame to every open socket of a tab. */
function sendToTab(tab: Tab, frame: ServerFrame): void {
  const data = JSON.stringify(frame);
  for (const ws of tab.sockets) if (ws.readyState === ws.OPEN) ws.send(data);
}
