import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import type { ChannelAdapter, ChannelCapabilities, Deliver, TransportOptions } from '../../src/dispatch/adapter.js';
import type { MessageRef, ReplyTarget } from '../../src/dispatch/message.js';
import { isLoopbackClient, pageHeaders, secretEquals, type HttpRoutes, type RouteHandler } from '../../src/observe/http.js';
import type { Logger } from '../../src/observe/logger.js';
import { parseClientFrame, type ServerFrame } from './protocol.js';

// `npm run build` copies the page next to the compiled module.
const page = readFileSync(new URL('./page.html', import.meta.url), 'utf8');

/** Replies kept per tab so a reloaded tab sees the conversation's latest drafts. */
const BACKLOG = 50;
const MAX_TEXT = 16_000;

interface Tab {
  sockets: Set<WebSocket>;
  backlog: Map<string, { text: string; final: boolean }>;
  lastSeenMs: number;
}

export interface WebchatOptions {
  id: string;
  http: HttpRoutes;
  log: Logger;
  /** When set, clients must present it; otherwise only loopback clients are accepted. */
  accessToken?: string;
  /** Tabs whose backlog is kept, and the bytes all backlogs may hold; least recently used closed tabs go first. */
  backlogMaxTabs?: number;
  backlogMaxBytes?: number;
  /** Told how many kept replies were evicted to stay within the bounds. */
  onEvict?: (count: number) => void;
}

/** About what a kept reply costs: its text (UTF-16) plus the entry around it. */
const replyBytes = (text: string) => 2 * text.length + 256;

/** The local web chat: a page and a WebSocket on the daemon's HTTP server; each tab is a conversation. */
export class WebchatAdapter implements ChannelAdapter {
  readonly capabilities: ChannelCapabilities = {
    maxMessageLength: 8000,
    editsDrafts: true,
    minEditIntervalMs: 100,
    nativeStream: 'none',
    typing: true,
    typingRefreshMs: 3000,
    threads: false,
  };
  readonly selfId = 'channeld';
  readonly selfName = 'channeld';
  readonly #o: WebchatOptions;
  /** Least recently used first (a tab is re-inserted when it connects or sends). */
  readonly #tabs = new Map<string, Tab>();
  #backlogBytes = 0;

  constructor(options: WebchatOptions) {
    this.#o = options;
  }

  get id(): string {
    return this.#o.id;
  }

  #authorized(req: IncomingMessage, url: URL): boolean {
    if (this.#o.accessToken === undefined) return isLoopbackClient(req);
    const given = url.searchParams.get('token') ?? /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '';
    return secretEquals(given, this.#o.accessToken);
  }

  async listen(deliver: Deliver, signal: AbortSignal, onConnected: () => void): Promise<void> {
    const wss = new WebSocketServer({ noServer: true, maxPayload: 64 * 1024 });
    const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer, url: URL) => {
      if (!this.#authorized(req, url)) {
        socket.end('HTTP/1.1 401 Unauthorized\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
        return;
      }
      const tabId = (url.searchParams.get('tab') ?? '').slice(0, 64) || randomUUID();
      wss.handleUpgrade(req, socket, head, (ws) => this.#attach(ws, tabId, deliver));
    };
    // The first web chat to start also answers on `/` and `/chat`; every one has `/webchat/<id>`.
    const primary = !this.#o.http.has('GET', '/');
    const serve: RouteHandler = (_req, res) => servePage(res, this.#o.id);
    const disposers = [
      this.#o.http.upgrade(`/chat/${this.#o.id}`, onUpgrade),
      this.#o.http.route('GET', `/webchat/${this.#o.id}`, serve),
      ...(primary ? [this.#o.http.upgrade('/chat', onUpgrade), this.#o.http.route('GET', '/', serve)] : []),
    ];
    onConnected();
    await new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true })));
    for (const dispose of disposers.reverse()) dispose();
    for (const ws of wss.clients) ws.close(1001, 'channel stopping');
    await new Promise<void>((resolve) => wss.close(() => resolve()));
    this.#tabs.clear();
    this.#backlogBytes = 0;
  }

  #attach(ws: WebSocket, tabId: string, deliver: Deliver): void {
    const tab = this.#tabs.get(tabId) ?? { sockets: new Set(), backlog: new Map(), lastSeenMs: Date.now() };
    this.#touch(tabId, tab);
    tab.sockets.add(ws);
    this.#enforceBounds();
    for (const [ref, r] of tab.backlog) ws.send(JSON.stringify({ type: 'reply', ref, ...r } satisfies ServerFrame));
    ws.on('message', async (data) => {
      const frame = parseClientFrame(String(data));
      if (!frame) return ws.send(JSON.stringify({ type: 'error', message: 'unreadable frame: send {"type":"message","id":"...","text":"..."}' } satisfies ServerFrame));
      const text = frame.text.slice(0, MAX_TEXT);
      if (!text.trim()) return;
      tab.lastSeenMs = Date.now();
      this.#touch(tabId, tab);
      try {
        await deliver({
          channelId: this.#o.id,
          kind: 'webchat',
          messageId: `${tabId}:${frame.id}`,
          chat: { id: tabId, type: 'dm' },
          sender: { id: tabId, name: 'web user', isBot: false },
          text,
          attachments: [],
          addressed: true,
          receivedAt: Date.now(),
        });
        ws.send(JSON.stringify({ type: 'ack', id: frame.id } satisfies ServerFrame));
      } catch (err) {
        this.#o.log.warn({ err, channel: this.#o.id }, 'web chat message not stored');
        ws.send(JSON.stringify({ type: 'error', message: 'the daemon could not take this message; try again' } satisfies ServerFrame));
      }
    });
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
    const tab = this.#tabs.get(chatId);
    if (!tab) return;
    if (frame.type === 'reply') {
      this.#forgetReply(tab, frame.ref);
      tab.backlog.set(frame.ref, { text: frame.text, final: frame.final });
      this.#backlogBytes += replyBytes(frame.text);
      if (tab.backlog.size > BACKLOG) this.#forgetReply(tab, tab.backlog.keys().next().value!);
      this.#enforceBounds();
    }
    if (frame.type === 'delete') this.#forgetReply(tab, frame.ref);
    const data = JSON.stringify(frame);
    for (const ws of tab.sockets) if (ws.readyState === ws.OPEN) ws.send(data);
  }

  async send(target: ReplyTarget, text: string, options?: TransportOptions): Promise<MessageRef> {
    const ref = randomUUID();
    this.#broadcast(target.chatId, { type: 'reply', ref, text, final: options?.final ?? false });
    return { chatId: target.chatId, messageId: ref };
  }

  async edit(ref: MessageRef, text: string, options?: TransportOptions): Promise<void> {
    this.#broadcast(ref.chatId, { type: 'reply', ref: ref.messageId, text, final: options?.final ?? false });
  }

  async finalize(refs: readonly MessageRef[]): Promise<void> {
    for (const ref of refs) {
      const r = this.#tabs.get(ref.chatId)?.backlog.get(ref.messageId);
      if (r && !r.final) this.#broadcast(ref.chatId, { type: 'reply', ref: ref.messageId, text: r.text, final: true });
    }
  }

  async delete(ref: MessageRef): Promise<void> {
    this.#broadcast(ref.chatId, { type: 'delete', ref: ref.messageId });
  }

  async typing(target: ReplyTarget): Promise<void> {
    this.#broadcast(target.chatId, { type: 'typing' });
  }

  /** Tabs and approximate backlog bytes held now. */
  get memory(): { tabs: number; backlogBytes: number } {
    return { tabs: this.#tabs.size, backlogBytes: this.#backlogBytes };
  }
}

function servePage(res: import('node:http').ServerResponse, channelId: string): void {
  const html = page.replace('__CHANNEL_ID__', channelId);
  res.writeHead(200, pageHeaders("default-src 'self'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src 'self' ws: wss:"));
  res.end(html);
}
