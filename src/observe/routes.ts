import type { HttpRoutes } from '../contracts/http.js';
import { sendJson } from '../util/http-helpers.js';
import type { Metrics } from './metrics.js';

/** What /readyz needs of the daemon's status (the whole payload is the status action's). */
export interface ReadyStatus {
  ready: boolean;
  ready_requires?: string;
  storage: { state: string; code: string | null };
  channels: ReadonlyArray<{ id: string; state: string }>;
}

/** Registers /healthz, /readyz and /metrics (/status is the status action's HTTP face); returns the disposer. */
export function registerStatusRoutes(http: HttpRoutes, metrics: Metrics, status: () => ReadyStatus): () => void {
  const disposers = [
    http.route('GET', '/healthz', (_req, res) => sendJson(res, 200, { ok: true })),
    http.route('GET', '/readyz', (_req, res) => {
      const s = status();
      sendJson(res, s.ready ? 200 : 503, {
        ready: s.ready,
        ...(s.ready_requires ? { ready_requires: s.ready_requires } : {}),
        storage: s.storage.state,
        ...(s.storage.code ? { storage_code: s.storage.code } : {}),
        channels: s.channels.map((c) => ({ id: c.id, state: c.state })),
      });
    }),
    http.route('GET', '/metrics', async (_req, res) => {
      const text = await metrics.registry.metrics();
      res.writeHead(200, { 'content-type': metrics.registry.contentType });
      res.end(text);
    }),
  ];
  return () => {
    for (const d of disposers.reverse()) d();
  };
}
