import type { ClusterStatus } from '../contracts/topology.js';
import type { TrackedTask } from '../dispatch/tracker.js';
import type { McpServerStatus } from '../mcp/server.js';
import type { StorageStatus } from '../store/health.js';

/** What /status reports; the CLI's `channeld status` prints the same object. */
export interface DaemonStatus {
  version: string;
  pid: number;
  started_at: string;
  uptime_s: number;
  generation: number;
  ready: boolean;
  /** `[http] ready_requires`: what `ready` means. */
  ready_requires?: 'http' | 'any_channel' | 'all_channels';
  channels: Array<Record<string, unknown> & { id: string; state: string; in_flight: number; queued: number }>;
  turns: { in_flight: number; queued: number; list: TrackedTask[] };
  agents: Array<{
    name: string;
    provider: string;
    model: string | null;
    fallback_models: string[];
    cooling: Array<{ model: string; until: string; failures: number }>;
    last_served: string | null;
    budget?: { daily: number; spent_today: number; left: number };
  }>;
  last_reload: { ok: boolean; at: string; errors: string[] } | null;
  /** `degraded` (with the SQLite code) while the database cannot take writes; then not ready. */
  storage: StorageStatus;
  /** Every agent's MCP servers: state, tool count, last error. */
  mcp_servers?: McpServerStatus[];
  /** Cluster mode: instances (with their config generation and turns), leases, partitions. */
  cluster?: ClusterStatus;
  /** The webhook routes now registered, each with its declared authentication scheme. */
  webhooks?: Array<{ method: string; path: string; scheme: string; describe: string }>;
  /** `[[schedules]]`: each one's next firing. */
  schedules?: Array<{ id: string; channel: string; next_fire_at: string | null }>;
  /** Reminders (`/remind`, `schedule_message`): how many are pending, and the next firing of all. */
  reminders?: { pending: number; next_fire_at: string | null };
}
