import type { ActionRegistry } from '../actions/registry.js';
import type { AgentConfig } from '../config/schema.js';
import type { Topology } from '../contracts/topology.js';
import type { Dispatcher, DispatchChannel } from '../dispatch/dispatcher.js';
import type { TaskTracker } from '../dispatch/tracker.js';
import type { Component } from '../kernel/component.js';
import type { McpHub } from '../mcp/hub.js';
import type { HttpServer } from '../observe/http-server.js';
import type { Logger } from '../observe/logger.js';
import type { Metrics } from '../observe/metrics.js';
import type { Approvals } from '../store/approvals.js';
import type { Conversations } from '../store/conversations.js';
import type { GroupCommit } from '../store/group-commit.js';
import type { Inbox } from '../store/inbox.js';
import type { Memories } from '../store/memories.js';
import type { MinuteStore } from '../observe/minute-figures.js';
import type { Reminders } from '../store/reminders.js';
import type { Sessions } from '../store/sessions.js';
import type { UsageLedger } from '../store/usage-ledger.js';
import type { SpendReservations } from '../store/reservations.js';
import type { Supervisor } from '../supervisor/supervisor.js';
import type { ApprovalCoordinator } from '../tools/approvals.js';
import type { ToolCalls } from '../tools/tool-calls.js';
import type { Workspace } from '../workspace/workspace.js';
import type { LiveUsage } from '../workspace/live-usage.js';
import type { ManagementApi } from '../actions/action.js';
import type { DaemonStatus } from '../actions/daemon-status.js';
import type { LiveConfig } from './config-service.js';
import type { Extensions } from './extensions.js';
import type { MessageTracing } from '../dispatch/tracing.js';
import type { ChartSource } from '../observe/chart-report.js';
import type { Upgrades } from './upgrade/service.js';

// The service types below are interfaces (or classes from modules that do not import this
// one), so the component modules that implement them can import `defineComponent` from here
// without an import cycle.

/** The channels running now, by id; `removing` marks those whose unload is a removal (turns cancelled). */
export class ChannelTable extends Map<string, DispatchChannel> {
  readonly removing = new Set<string>();
}

/** The running workspaces by agent name, and how to build one (reload rebuilds changed agents). */
export interface WorkspaceTable {
  byName: Map<string, Workspace>;
  build(name: string, agent: AgentConfig): Workspace;
  /** The usage of turns still running in this process, which /usage adds to the stored ledger. */
  live: LiveUsage;
}

/** The `management` service: the ManagementApi actions run against, bound once the daemon serves it (src/daemon/management.ts). */
export interface ManagementBinding extends ManagementApi {
  bind(api: ManagementApi): () => void;
  /** The upgrade component binds `upgrade` on its own (it starts after the management component). */
  bindUpgrade(upgrade: NonNullable<ManagementApi['upgrade']>): () => void;
}

/** The `status` service (src/daemon/status.ts). */
export interface StatusView {
  readonly startedAt: Date;
  /** Set by the lifecycle once every configured channel has been handed to the supervisor. */
  channelsLoaded: boolean;
  /** Set by the reminders component: how many are pending and the next firing, for /status. */
  reminders?: (() => { pending: number; next_fire_at: string | null }) | undefined;
  ready(): boolean;
  status(): DaemonStatus;
}

export interface ReloadResult {
  ok: boolean;
  generation: number;
  errors: string[];
  added: string[];
  removed: string[];
  changed: string[];
  /** Agents whose workspace was rebuilt. */
  agents: string[];
  /** Set by the dry run: validated in the daemon's environment, nothing applied. */
  dry_run?: boolean;
  file?: string;
}

/** The `reload` service (src/daemon/reload.ts). */
export interface ReloadService {
  /** Re-reads the config file and applies it; `dryRun` only validates it. */
  reload(options?: { dryRun?: boolean }): Promise<ReloadResult>;
  /** A reload is being applied now (channels and agents unloaded and loaded anew). */
  readonly applying: boolean;
}

/** Aborted when final-text retries must stop: the grace is over, or a second signal came. */
export interface HardStop {
  readonly signal: AbortSignal;
}

/**
 * Every service of the daemon, by name: the one place a name maps to its type. A component's
 * `ctx.use('x')` has the type of `Services['x']`, and only for the names in its `inject`.
 * A new service is added here and to `names` below (the run-time list the plan is checked
 * against), in this file: the `satisfies` check on `names` keeps the two the same, so a
 * service added elsewhere by declaration merging would not compile.
 */
export interface Services {
  /** The live config; reload replaces its value. */
  config: LiveConfig;
  shutdown: HardStop;
  logger: Logger;
  metrics: Metrics;
  /** The SQLite write path and its health (the local store runs in cluster mode too). */
  storage: GroupCommit;
  /** The SQLite inbox (one node's intake; in cluster mode it stays empty: the shared inbox is the topology's). */
  inbox: Inbox;
  sessions: Sessions;
  conversations: Conversations;
  usage: UsageLedger;
  'approval-store': Approvals;
  /** Spend reservations (daily budgets): in memory on one node, PostgreSQL in cluster mode. */
  spend: SpendReservations;
  /** Users' memories (`[agent] memory`): SQLite with FTS5 on one node, PostgreSQL in cluster mode. */
  memories: Memories;
  /** The /admin charts' minutes across restarts: SQLite on one node, PostgreSQL in cluster mode. */
  minutes: MinuteStore;
  /** The /admin charts' figures (src/daemon/charts.ts). */
  charts: ChartSource;
  /** Reminders (`/remind`, `schedule_message`): SQLite on one node, PostgreSQL in cluster mode. */
  reminders: Reminders;
  http: HttpServer;
  actions: ActionRegistry;
  /** What management actions ask of the daemon; bound by the management component. */
  management: ManagementBinding;
  channels: ChannelTable;
  mcp: McpHub;
  approvals: ApprovalCoordinator;
  /** Every tool call: approval, `/stop tool`, background calls (src/tools/tool-calls.ts). */
  'tool-calls': ToolCalls;
  workspaces: WorkspaceTable;
  tracker: TaskTracker;
  supervisor: Supervisor;
  dispatcher: Dispatcher;
  /** One node or a cluster (src/contracts/topology.ts), chosen once at composition (src/daemon/topology.ts). */
  topology: Topology;
  /** Modes, tools, hooks and commands from plugin folders, applied to every workspace's runtime. */
  extensions: Extensions;
  status: StatusView;
  reload: ReloadService;
  /** Traces of each message (`[observe] otlp_endpoint`); pass-through when off. */
  tracing: MessageTracing;
  /** `channeld upgrade` and SIGUSR2: both ends of a zero-downtime upgrade (src/daemon/upgrade/). */
  upgrade: Upgrades;
}

export type ServiceName = keyof Services & string;

/** The names of `Services` at run time; `satisfies` keeps it complete and exact. */
const names = {
  config: true,
  shutdown: true,
  logger: true,
  metrics: true,
  storage: true,
  inbox: true,
  sessions: true,
  conversations: true,
  usage: true,
  'approval-store': true,
  spend: true,
  memories: true,
  minutes: true,
  charts: true,
  reminders: true,
  http: true,
  actions: true,
  management: true,
  channels: true,
  mcp: true,
  approvals: true,
  'tool-calls': true,
  workspaces: true,
  tracker: true,
  supervisor: true,
  dispatcher: true,
  topology: true,
  extensions: true,
  status: true,
  reload: true,
  tracing: true,
  upgrade: true,
} satisfies Record<ServiceName, true>;
export const serviceNames: ReadonlySet<ServiceName> = new Set(Object.keys(names) as ServiceName[]);

/** A component of the daemon's kernel. */
export type DaemonComponent = Component<Services>;

/**
 * Declares a daemon component with its `inject` and `provides` lists as literal types, so its
 * context allows exactly those: `ctx.use('db')` without `'db'` in `inject` does not compile
 * (and the kernel refuses it at run time as well).
 */
export function defineComponent<const I extends ServiceName = never, const P extends ServiceName = never>(
  component: Component<Services, I, P>,
): DaemonComponent {
  return component;
}
