import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import type { HttpRoutes } from '../contracts/http.js';
import { openEventStream, pageHeaders, sendJson } from '../util/http-helpers.js';
import type { DaemonStatus } from './daemon-status.js';
import { checkAdmin } from './access.js';
import { registerAdminCharts } from './admin-charts.js';

// `npm run build` copies the page next to the compiled module.
const page = readFileSync(new URL('./admin.html', import.meta.url), 'utf8');
const script = readFileSync(new URL('./admin-page.js', import.meta.url), 'utf8');
const firingsScript = readFileSync(new URL('./admin-firings.js', import.meta.url), 'utf8');
/** The tab icon: a speech bubble, inline so the build copies nothing more. */
const favicon =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect x="3" y="4" width="26" height="19" rx="5" fill="#2563eb"/><path d="M9 23v6l7-6z" fill="#2563eb"/><circle cx="10" cy="13.5" r="2" fill="#fff"/><circle cx="16" cy="13.5" r="2" fill="#fff"/><circle cx="22" cy="13.5" r="2" fill="#fff"/></svg>';
const CHECK_EVERY_MS = 500;
const KEEPALIVE_MS = 15_000;

/** What the page shows; when it changes, the page is told to read the action routes again. */
function digest(s: DaemonStatus): string {
  // A reload refused by SIGHUP or the CLI changes only last_reload: it is pushed too.
  const view = {
    channels: s.channels.map((c) => [c.id, c.state, c.connection, (c.last_error as { code?: string } | null)?.code]),
    turns: s.turns.list.map((t) => [t.id, t.state, t.model]),
    generation: s.generation,
    reload: s.last_reload?.at,
    mcp: (s.mcp_servers ?? []).map((m) => [m.agent, m.name, m.state, m.connection, m.tools]),
    firings: [(s.schedules ?? []).map((x) => [x.id, x.next_fire_at]), s.reminders],
  };
  return createHash('sha1').update(JSON.stringify(view)).digest('hex');
}

/**
 * `/admin`: a page (no build step) over the same action routes, and `/admin/events`, an SSE
 * stream that says "changed" whenever channels or turns change, so the page refreshes live.
 */
export function registerAdminPage(http: HttpRoutes, adminToken: () => string | undefined, status: () => DaemonStatus): () => void {
  const streams = new Set<ServerResponse>();
  const removePage = http.route('GET', '/admin', (_req, res) => {
    res.writeHead(200, pageHeaders("default-src 'self'; style-src 'self' 'unsafe-inline'; script-src 'self'"));
    res.end(page);
  });
  const removeScript = http.route('GET', '/admin/page.js', (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'no-cache', 'x-content-type-options': 'nosniff' }).end(script);
  });
  const removeCharts = registerAdminCharts(http);
  const removeFirings = http.route('GET', '/admin/firings.js', (_req, res) => {
    res
      .writeHead(200, { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'no-cache', 'x-content-type-options': 'nosniff' })
      .end(firingsScript);
  });
  const removeIcon = http.route('GET', '/admin/favicon.svg', (_req, res) => {
    res.writeHead(200, { 'content-type': 'image/svg+xml', 'cache-control': 'max-age=86400', 'x-content-type-options': 'nosniff' }).end(favicon);
  });
  const removeEvents = http.route('GET', '/admin/events', (req, res, url) => {
    const verdict = checkAdmin(req, url, adminToken());
    if (verdict !== 'ok') return sendJson(res, verdict === 'forbidden' ? 403 : 401, { error: verdict });
    openEventStream(res, { 'cache-control': 'no-store' });
    let last = '';
    let idle = 0;
    const tick = () => {
      const d = digest(status());
      if (d !== last) {
        last = d;
        idle = 0;
        res.write(`event: changed\ndata: ${JSON.stringify({ at: new Date().toISOString() })}\n\n`);
      } else if ((idle += CHECK_EVERY_MS) >= KEEPALIVE_MS) {
        idle = 0;
        res.write(': keep-alive\n\n');
      }
    };
    tick();
    const timer = setInterval(tick, CHECK_EVERY_MS);
    streams.add(res);
    res.on('close', () => {
      clearInterval(timer);
      streams.delete(res);
    });
  });
  return () => {
    removeEvents();
    removeIcon();
    removeCharts();
    removeScript();
    removeFirings();
    removePage();
    for (const res of streams) res.end();
  };
}
