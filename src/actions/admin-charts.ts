import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { HttpRoutes } from '../contracts/http.js';

/**
 * The files of the /admin charts, served by the daemon itself (no CDN: the page works
 * offline and under `script-src 'self'`): the page's chart script next to this module
 * (`npm run build` copies it), and uPlot from its package. Read on first request, so a
 * missing file costs the charts, not the start-up.
 */
const files: Record<string, { type: string; read: () => string }> = {
  '/admin/charts.js': { type: 'text/javascript', read: () => readFileSync(new URL('./admin-charts-page.js', import.meta.url), 'utf8') },
  '/admin/uplot.js': { type: 'text/javascript', read: () => readFileSync(uplot('uPlot.iife.min.js'), 'utf8') },
  '/admin/uplot.css': { type: 'text/css', read: () => readFileSync(uplot('uPlot.min.css'), 'utf8') },
};

function uplot(file: string): string {
  return createRequire(import.meta.url).resolve(`uplot/dist/${file}`);
}

/** Adds the chart files' routes; returns their disposer. */
export function registerAdminCharts(http: HttpRoutes): () => void {
  const cache = new Map<string, string>();
  const removers = Object.entries(files).map(([path, f]) =>
    http.route('GET', path, (_req, res) => {
      let body = cache.get(path);
      try {
        body ??= f.read();
      } catch {
        res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('not installed\n');
        return;
      }
      cache.set(path, body);
      res.writeHead(200, { 'content-type': `${f.type}; charset=utf-8`, 'cache-control': 'no-cache', 'x-content-type-options': 'nosniff' }).end(body);
    }),
  );
  return () => {
    for (const remove of removers) remove();
  };
}
