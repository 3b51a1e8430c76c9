import type { TrackedTask } from '../dispatch/tracker.js';
import type { McpServerStatus } from '../mcp/server.js';
import type { Metrics } from './metrics.js';
import type { StorageStatus } from '../store/health.js';
import { sendJson } from '../util/http.js';
import { type HttpRoutes } from '../contracts/http.js';

/** What /status reports; the CLI's `channeld status` prints the same object. */
export interface DaemonStatus {
  version: string;
  pid: number;
  started_at: string;
  uptime_s: number;
  generation: number;
  ready: boolean;
  channels: Array<Record<string, unknown> & { id: string; state: string; in_flight: number; queued: number }>;
  turns: { in_flight: number; queued: number; list: TrackedTask[] };
  agents: Array<{ name: string; provider: string; model: string | null; fallback_models: string[]; cooling: Array<{ model: string; until: string; failures: number }>; last_served: string | null; budget?: { daily: number; spent_today: number; left: number } }>;
  last_reload: { ok: boolean; at: string; errors: string[] } | null;
  /** `degraded` (with the SQLite code) while the database cannot take writes; then not ready. */
  storage: StorageStatus;
  /** Every agent's MCP servers: state, tool count, last error. */
  mcp_servers?: McpServerStatus[];
  /** Cluster mode: instances (with their config generation and turns), leases, partitions. */
  cluster?: import('../cluster/compose.js').ClusterStatus;
}

/** Registers /healthz, /readyz and /metrics (/status is the status action's HTTP face); returns the disposer. */
export function registerStatusRoutes(http: HttpRoutes, metrics: Metrics, status: () => DaemonStatus): () => void {
  const disposers = [
    http.route('GET', '/healthz', (_req, res) => sendJson(res, 200, { ok: true })),
    http.route('GET', '/readyz', (_req, res) => {
      const s = status();
      sendJson(res, s.ready ? 200 : 503, { ready: s.ready, storage: s.storage.state, ...(s.storage.code ? { storage_code: s.storage.code } : {}), channels: s.channels.map((c) => ({ id: c.id, state: c.state })) });
    }),
    http.route('GET', '/metrics', async (_req, res) => {
      const text = await metrics.registry.metrics();
      res.writeHead(200, { 'content-type': metrics.registry.contentType });
      res.end(text);
    }),
  ];
  return () => disposers.reverse().forEach((d) => d());
}
