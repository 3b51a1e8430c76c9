import { WEBHOOK_PREFIX, type HttpRoutes, type RouteAuth, type RouteHandler, type UpgradeHandler } from '../contracts/http.js';
import { CodedError } from '../contracts/errors.js';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { AddressInfo } from 'node:net';
import { hostAllowed, isEventStream, originAllowed, refuseUpgrade, sendJson } from '../util/http-helpers.js';
import { takeInheritedListenFd } from '../util/listen-fd.js';
import { ConnectionDrain } from './http-drain.js';

/**
 * node:http as Node's own CommonJS module, not an ESM import: importing it as ESM makes Node
 * build its ESM facade, which reads every export, `http.WebSocket` among them, and so loads
 * Node's bundled undici and http2 at start-up, 45-60 ms of CPU the daemon never uses.
 */
const { createServer } = process.getBuiltinModule('node:http');
/** Idle keep-alive connections are closed after this; clients are told (`Keep-Alive: timeout=5`) and close theirs first. */
export const KEEP_ALIVE_TIMEOUT_MS = 5_000;
/**
 * How long an upgrade's old process waits for its HTTP connections to end. Node closes a
 * connection idle for the keep-alive timeout and a second more, and every answer whose head
 * goes out after the hand-over says `Connection: close`: by then only a connection whose
 * answer had its head out at the hand-over and ended over a second later can be open, and it
 * is cut.
 */
export const HTTP_DRAIN_MS = KEEP_ALIVE_TIMEOUT_MS + 2_000;
/** net.Server's own close: stops accepting and leaves every connection open (see stopAccepting). */
const closeListener = process.getBuiltinModule('node:net').Server.prototype.close;

/** The request's target as a URL; undefined when it is none (`//[`, `http://a%zz/`): Node passes such targets on. */
function requestUrl(req: IncomingMessage): URL | undefined {
  try {
    return new URL(req.url ?? '/', 'http://localhost');
  } catch {
    return undefined;
  }
}

/**
 * The daemon's HTTP server: health, status, metrics, webhooks, web chat and admin all
 * register routes on it. Routes can be added and removed while it runs (channels reload).
 */
export class HttpServer implements HttpRoutes {
  readonly #routes = new Map<string, RouteHandler>();
  readonly #prefixes: { method: string; prefix: string; handler: RouteHandler }[] = [];
  readonly #upgrades = new Map<string, UpgradeHandler>();
  /** The webhook routes now registered, each with its declared authentication. */
  readonly #webhooks = new Set<WebhookRoute>();
  readonly #server: Server;
  readonly #onError: (err: unknown) => void;
  readonly #allowedHosts: () => readonly string[];
  readonly #connections = new ConnectionDrain();
  /** Answers under way: at the hand-over each one not begun yet closes its connection. */
  readonly #responses = new Set<ServerResponse>();
  /** An upgrade's old process stopped accepting: each answer closes its connection. */
  #draining = false;

  /**
   * `allowedHosts` are the names (besides loopback ones) a request's `Host` may carry; it
   * is read per request, so a reload applies at once. Webhook routes (`/webhooks/*`) are
   * authenticated by the platform's secret and answer any `Host`, as proxies may rewrite it.
   */
  constructor(onError: (err: unknown) => void = () => {}, allowedHosts: () => readonly string[] = () => []) {
    this.#onError = onError;
    this.#allowedHosts = allowedHosts;
    this.#server = createServer((req, res) =>
      this.#handle(req, res).catch((err: unknown) => {
        // #handle answers its own failures; one it could not is still not the process's end.
        this.#onError(err);
        res.destroy();
      }),
    );
    this.#server.on('connection', (socket) => this.#connections.track(socket));
    this.#server.on('upgrade', (req, socket, head) => this.#handleUpgrade(req, socket, head));
    // Keep-alive sockets must not hold shutdown hostage.
    this.#server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  }

  route(method: string, path: string, handler: RouteHandler, auth?: RouteAuth): () => void {
    const webhook = declaredWebhook(method, path, auth);
    if (webhook) this.#webhooks.add(webhook);
    const forget = () => void (webhook && this.#webhooks.delete(webhook));
    if (path.endsWith('/*')) {
      const entry = { method, prefix: path.slice(0, -1), handler };
      this.#prefixes.push(entry);
      return () => {
        forget();
        this.#prefixes.splice(this.#prefixes.indexOf(entry) >>> 0, 1);
      };
    }
    const key = `${method} ${path}`;
    this.#routes.set(key, handler);
    return () => {
      forget();
      if (this.#routes.get(key) === handler) this.#routes.delete(key);
    };
  }

  /** Every registered route as `METHOD path` (a prefix route ends in `*`), sorted. */
  routes(): string[] {
    return [...this.#routes.keys(), ...this.#prefixes.map((p) => `${p.method} ${p.prefix}*`)].sort();
  }

  /** The registered webhook routes with their declared authentication, by path then method. */
  webhooks(): WebhookRoute[] {
    return [...this.#webhooks].sort((a, b) => a.path.localeCompare(b.path) || a.method.localeCompare(b.method));
  }

  has(method: string, path: string): boolean {
    return this.#routes.has(`${method} ${path}`);
  }

  ownOrigin(req: IncomingMessage): boolean {
    const origin = req.headers.origin;
    return origin === undefined || originAllowed(origin, req.headers.host, this.#allowedHosts());
  }

  upgrade(path: string, handler: UpgradeHandler): () => void {
    this.#upgrades.set(path, handler);
    return () => void (this.#upgrades.get(path) === handler && this.#upgrades.delete(path));
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // The client's next request opens a new connection, which the new process accepts.
    if (this.#draining) res.setHeader('Connection', 'close');
    this.#responses.add(res);
    res.once('close', () => this.#responses.delete(res));
    const url = requestUrl(req);
    if (!url) {
      req.resume();
      res.setHeader('Connection', 'close');
      sendJson(res, 400, { error: 'the request target is not a URL' });
      return;
    }
    if (!url.pathname.startsWith('/webhooks/') && !hostAllowed(req.headers.host, this.#allowedHosts())) {
      req.resume();
      sendJson(res, 421, { error: `this daemon does not answer to host "${req.headers.host ?? ''}"; add it to [http] allowed_hosts` });
      return;
    }
    const method = req.method === 'HEAD' ? 'GET' : (req.method ?? 'GET');
    const handler =
      this.#routes.get(`${method} ${url.pathname}`) ?? this.#prefixes.find((p) => p.method === method && url.pathname.startsWith(p.prefix))?.handler;
    if (!handler) {
      if (this.#draining) {
        // The channel's route went with the hand-over: the new process has it.
        res.setHeader('Retry-After', '1');
        sendJson(res, 503, { error: 'this process handed over to a new one: retry' });
        return;
      }
      const other = [...this.#routes.keys()].some((k) => k.endsWith(` ${url.pathname}`)) || this.#prefixes.some((p) => url.pathname.startsWith(p.prefix));
      sendJson(res, other ? 405 : 404, { error: other ? 'method not allowed' : 'not found' });
      return;
    }
    try {
      await handler(req, res, url);
      // An event stream would hold the drain to its end: its client reconnects, to the new process.
      if (this.#draining && isEventStream(res)) res.destroy();
    } catch (err) {
      this.#onError(err);
      if (!res.headersSent) sendJson(res, 500, { error: 'internal error' });
      else res.destroy();
    }
  }

  #handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    // Node takes its own error listener off an upgraded socket: a client resetting it while a
    // refusal is written would be an 'error' nobody listens to, which ends the process.
    socket.on('error', () => socket.destroy());
    // Not plain HTTP any more: whoever takes it (or the refusal below) ends it.
    this.#connections.forget(req.socket);
    const url = requestUrl(req);
    if (!url) {
      refuseUpgrade(socket, '400 Bad Request');
      return;
    }
    // A browser always sends Origin on a WebSocket: a page of another site must not talk
    // to the agent and read its answers. Non-browser clients send none.
    if (!hostAllowed(req.headers.host, this.#allowedHosts()) || !this.ownOrigin(req)) {
      refuseUpgrade(socket, '403 Forbidden');
      return;
    }
    const handler = this.#upgrades.get(url.pathname);
    if (!handler) {
      refuseUpgrade(socket, '404 Not Found');
      return;
    }
    handler(req, socket, head, url);
  }

  /**
   * Starts listening; resolves with the bound address (port 0 picks a free one). The new
   * process of an upgrade listens on the socket the old one handed it instead (the same
   * address: `[http] listen` needs a restart to change).
   */
  async listen(host: string, port: number): Promise<AddressInfo> {
    const inherited = takeInheritedListenFd();
    await new Promise<void>((resolve, reject) => {
      const onError = (err: Error) => reject(err);
      this.#server.once('error', onError);
      const where = inherited === undefined ? { port, host } : { fd: inherited };
      this.#server.listen(where, () => {
        this.#server.off('error', onError);
        resolve();
      });
    });
    return this.#server.address() as AddressInfo;
  }

  get address(): AddressInfo | undefined {
    return (this.#server.address() as AddressInfo | null) ?? undefined;
  }

  /** The listening socket's descriptor, for an upgrade to hand over (undefined when not listening or not known). */
  listeningFd(): number | undefined {
    const fd = (this.#server as unknown as { _handle?: { fd?: number } })._handle?.fd;
    return typeof fd === 'number' && fd >= 0 ? fd : undefined;
  }

  /**
   * Upgrade: this process stops accepting (its successor accepts on the same socket) and
   * keeps serving the connections it has, each answer closing its connection; drained()
   * tells when they ended, close() ends what is left. http.Server's close would also
   * close idle keep-alive connections at once, and a request a client sent on one at that
   * moment would fail (src/observe/http-drain.ts): net.Server's close leaves them.
   */
  stopAccepting(): void {
    if (!this.#server.listening) return;
    this.#draining = true;
    closeListener.call(this.#server);
    for (const res of this.#responses) {
      // Cut rather than ended: a client sends nothing else on a connection whose answer is
      // under way, so nothing is lost, and it reconnects to the new process.
      if (isEventStream(res)) res.destroy();
      else if (!res.headersSent) res.setHeader('Connection', 'close');
    }
  }

  /** Resolves once every plain HTTP connection ended (after stopAccepting: each moved to the new process), or when `signal` aborts. */
  drained(signal: AbortSignal): Promise<void> {
    return this.#connections.drained(signal);
  }

  async close(): Promise<void> {
    if (!this.#server.listening) {
      // After stopAccepting the server no longer listens, but its connections still need
      // ending, and http.Server's close stops its request-timeout checks.
      this.#server.close();
      this.#server.closeAllConnections();
      return;
    }
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    this.#server.closeAllConnections();
    await closed;
  }
}

/** A registered webhook route and how it authenticates (for /status and the registry test). */
export interface WebhookRoute extends RouteAuth {
  method: string;
  path: string;
}

const SCHEMES: ReadonlySet<string> = new Set<RouteAuth['scheme']>(['secret-token', 'hmac-sha256', 'jwt', 'verify-token']);

/**
 * A route under /webhooks/ answers anyone on the internet (and any Host), so it is refused
 * unless it declares a known scheme and says what it checks: an ingress added without
 * authentication fails at registration, not in production.
 */
function declaredWebhook(method: string, path: string, auth: RouteAuth | undefined): WebhookRoute | undefined {
  if (!path.startsWith(WEBHOOK_PREFIX)) return undefined;
  if (!auth || !SCHEMES.has(auth.scheme) || !auth.describe?.trim())
    throw new CodedError(
      'WEBHOOK_AUTH_UNDECLARED',
      `${method} ${path} has ${auth ? `scheme "${String(auth.scheme)}" and describe "${auth.describe ?? ''}"` : 'no auth'}`,
    );
  return { method, path, scheme: auth.scheme, describe: auth.describe };
}
