import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';

export type RouteHandler = (req: IncomingMessage, res: ServerResponse, url: URL) => void | Promise<void>;
export type UpgradeHandler = (req: IncomingMessage, socket: Duplex, head: Buffer, url: URL) => void;

/** The one HTTP server's routing surface, handed to plugins and channels. */
export interface HttpRoutes {
  /** Adds a route; the returned function removes it. `path` ending in `/*` matches a prefix. */
  route(method: string, path: string, handler: RouteHandler): () => void;
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
