import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import { isLoopbackClient, pageHeaders } from '../../src/util/http-helpers.js';

// `npm run build` copies the page, its script and style next to the compiled module.
const page = readFileSync(new URL('./page.html', import.meta.url), 'utf8');
/** Served under /webchat/<id>/assets/: separate files, so the page needs no inline script. */
export const assets: Record<string, { type: string; body: string | Buffer }> = {
  'page.js': { type: 'text/javascript; charset=utf-8', body: readFileSync(new URL('./page.js', import.meta.url), 'utf8') },
  'render.js': { type: 'text/javascript; charset=utf-8', body: readFileSync(new URL('./render.js', import.meta.url), 'utf8') },
  'outbox.js': { type: 'text/javascript; charset=utf-8', body: readFileSync(new URL('./outbox.js', import.meta.url), 'utf8') },
  'page.css': { type: 'text/css; charset=utf-8', body: readFileSync(new URL('./page.css', import.meta.url), 'utf8') },
  // markdown-it's own browser build, straight from node_modules: no bundler, no copy in the repo.
  'markdown-it.js': { type: 'text/javascript; charset=utf-8', body: readFileSync(createRequire(import.meta.url).resolve('markdown-it/browser')) },
};

/**
 * How the page may connect: with the access token, without one, or not at all (no token is
 * set and this client is not loopback, so the socket would be refused: the page says why).
 */
export type PageAuth = 'token' | 'none' | 'refused';

/**
 * The chat page for one channel, with its asset path, id and auth mode filled in. Without a
 * token only loopback sockets are taken (isLoopbackClient): a page served to anyone else is
 * told so, instead of retrying a handshake that is refused every time.
 */
export function servePage(req: IncomingMessage, res: ServerResponse, channelId: string, hasToken: boolean): void {
  const auth: PageAuth = hasToken ? 'token' : isLoopbackClient(req) ? 'none' : 'refused';
  const html = page
    .replaceAll('__ASSETS__', `/webchat/${encodeURIComponent(channelId)}/assets`)
    .replace('__CHANNEL_ID__', channelId)
    .replace('__AUTH__', auth);
  res.writeHead(200, pageHeaders("default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self'; connect-src 'self' ws: wss:"));
  res.end(html);
}
