import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';

export type RouteHandler = (req: IncomingMessage, res: ServerResponse, url: URL) => void | Promise<void>;
export type UpgradeHandler = (req: IncomingMessage, socket: Duplex, head: Buffer, url: URL) => void;

/**
 * How a webhook route proves a request comes from its platform, checked before the body is
 * parsed: `secret-token` (a shared secret in a header, compared in constant time),
 * `hmac-sha256` (a signature over the raw body with a shared secret), `jwt` (a signed token
 * checked against the platform's published keys), `verify-token` (a subscription check that
 * echoes a challenge only for the configured token).
 */
export type WebhookAuthScheme = 'secret-token' | 'hmac-sha256' | 'jwt' | 'verify-token';

/** A webhook route's declared authentication: the scheme, and in a line what is checked. */
export interface RouteAuth {
  scheme: WebhookAuthScheme;
  describe: string;
}

/** Routes under this prefix are reached by platforms from outside and must declare a RouteAuth. */
export const WEBHOOK_PREFIX = '/webhooks/';

/** The one HTTP server's routing surface, handed to components and channels. */
export interface HttpRoutes {
  /**
   * Adds a route; the returned function removes it. `path` ending in `/*` matches a prefix.
   * A route under `/webhooks/` must pass `auth` (how its handler authenticates each request);
   * without it registration throws WEBHOOK_AUTH_UNDECLARED.
   */
  route(method: string, path: string, handler: RouteHandler, auth?: RouteAuth): () => void;
  upgrade(path: string, handler: UpgradeHandler): () => void;
  /** Whether a route is taken. */
  has(method: string, path: string): boolean;
  /**
   * Whether a request may come from the page that sent it: no `Origin` (not a browser), or
   * exactly the origin the daemon was reached at (its `Host`), or an `[http] allowed_hosts`
   * name. Another local web app (`http://localhost:<other port>`) is foreign.
   */
  ownOrigin(req: IncomingMessage): boolean;
}
