import { readFileSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import { pageHeaders } from '../../src/util/http-helpers.js';

// `npm run build` copies the page, its script and style next to the compiled module.
const page = readFileSync(new URL('./page.html', import.meta.url), 'utf8');
/** Served under /webchat/<id>/assets/: separate files, so the page needs no inline script. */
export const assets: Record<string, { type: string; body: string | Buffer }> = {
  'page.js': { type: 'text/javascript; charset=utf-8', body: readFileSync(new URL('./page.js', import.meta.url), 'utf8') },
  'page.css': { type: 'text/css; charset=utf-8', body: readFileSync(new URL('./page.css', import.meta.url), 'utf8') },
  // markdown-it's own browser build, straight from node_modules: no bundler, no copy in the repo.
  'markdown-it.js': { type: 'text/javascript; charset=utf-8', body: readFileSync(createRequire(import.meta.url).resolve('markdown-it/browser')) },
};

/** The chat page for one channel, with its asset path, id and auth mode filled in. */
export function servePage(res: ServerResponse, channelId: string, needsToken: boolean): void {
  const html = page
    .replaceAll('__ASSETS__', `/webchat/${encodeURIComponent(channelId)}/assets`)
    .replace('__CHANNEL_ID__', channelId)
    .replace('__AUTH__', needsToken ? 'token' : 'none');
  res.writeHead(200, pageHeaders("default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self'; connect-src 'self' ws: wss:"));
  res.end(html);
}
