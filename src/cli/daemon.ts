import { rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { diffChannels } from '../config/diff.js';
import type { ChannelKinds } from '../config/kinds.js';
import { loadConfig, type LoadedConfig } from '../config/load.js';
import type { Dispatcher } from '../dispatch/dispatcher.js';
import { ConfigError, errorMessage } from '../contracts/errors.js';
import { Kernel } from '../kernel/kernel.js';
import type { HttpServer } from '../observe/http.js';
import type { ManagementApi } from '../actions/action.js';
import { registerAdminPage } from '../actions/admin.js';
import type { ActionRegistry } from '../actions/registry.js';
import { agentOf } from '../config/load.js';
import type { Sessions } from '../store/sessions.js';
import type { ClusterComposition } from '../cluster/compose.js';
import type { UsageFilter, UsageLedger } from '../store/usage.js';
import type { Logger, LoggerOptions } from '../observe/logger.js';
import type { Metrics } from '../observe/metrics.js';
import type { McpHub } from '../mcp/hub.js';
import type { Inbox } from '../store/inbox.js';
import type { GroupCommit } from '../store/group-commit.js';
import type { TaskTracker } from '../dispatch/tracker.js';
import { registerStatusRoutes, type DaemonStatus } from '../observe/routes.js';
import type { Supervisor } from '../supervisor/supervisor.js';
import { channelPlugin, corePlugins, workspacePlugin, type ConfigHolder, type ListenerGate, type RemovalSet, type WorkspaceTable } from './plugins.js';
import { VERSION } from '../util/version.js';

export interface DaemonOptions {
  configFile: string;
  /** The channel kinds this build runs (the entry point hands them in). */
  kinds: ChannelKinds;
  env?: NodeJS.ProcessEnv;
  logger?: Partial<LoggerOptions>;
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

/** Keys a running daemon cannot change: the HTTP server and the database stay where they are. */
export const RESTART_KEYS = [
  ['[http] listen', (c: LoadedConfig) => c.config.http.listen],
  ['[daemon] state_dir', (c: LoadedConfig) => c.config.daemon.state_dir],
] as const;

/** Why a valid new config must not be applied by a reload, or undefined. */
function reloadRefusal(before: LoadedConfig, after: LoadedConfig): string | undefined {
  const restart = RESTART_KEYS.filter(([, get]) => get(before) !== get(after)).map(([key]) => key);
  if (restart.length) return `${after.file}: ${restart.join(' and ')} changed; ${restart.length > 1 ? 'they take' : 'it takes'} effect only on a restart (systemctl restart channeld). Nothing was applied; undo the change or restart.`;
  const enabled = (l: LoadedConfig) => l.config.channels.filter((c) => c.enabled).length;
  if (enabled(after) === 0 && enabled(before) > 0) {
    return `${after.file}: no channel is enabled in the new config, so this reload would stop every channel (an empty or truncated file?). Nothing was applied; to stop the daemon use systemctl stop channeld.`;
  }
  return undefined;
}

/** The running daemon: a kernel of core plugins plus one plugin per channel. */
export class Daemon implements ManagementApi {
  readonly #kernel: Kernel;
  readonly #holder: ConfigHolder;
  readonly #env: NodeJS.ProcessEnv;
  readonly #removing: RemovalSet = new Set();
  readonly #hardStop = new AbortController();
  readonly #startedAt = new Date();
  #lastReload: DaemonStatus['last_reload'] = null;
  #reloading: Promise<ReloadResult> | undefined;
  #again = false;
  #stopping: Promise<void> | undefined;
  /** Set once every configured channel has been handed to the supervisor. */
  #channelsLoaded = false;
  /** Cluster mode only; its code is loaded only when the config has [cluster]. */
  #cluster: ClusterComposition | undefined;
  #gate: ListenerGate | undefined;
  address!: AddressInfo;

  private constructor(loaded: LoadedConfig, env: NodeJS.ProcessEnv) {
    this.#holder = { loaded, generation: 1 };
    this.#env = env;
    this.#kernel = new Kernel({ onDisposeError: (plugin, err) => this.#logOrPrint(plugin, err) });
  }

  /** Loads the config, starts the core and every enabled channel; ready() tells when /readyz turns 200. */
  static async start(options: DaemonOptions): Promise<Daemon> {
    const env = options.env ?? process.env;
    const daemon = new Daemon(loadConfig(options.configFile, options.kinds, env), env);
    try {
      await daemon.#start(options);
    } catch (err) {
      // Whatever already runs (the HTTP server above all: /healthz must not say ok for a
      // daemon that never started) is stopped before the error goes up.
      await daemon.#kernel.stop().catch(() => {});
      throw err;
    }
    return daemon;
  }

  get log(): Logger {
    return this.#kernel.get<Logger>('logger');
  }
  get config(): LoadedConfig {
    return this.#holder.loaded;
  }
  get dispatcher(): Dispatcher {
    return this.#kernel.get<Dispatcher>('dispatcher');
  }
  get supervisor(): Supervisor {
    return this.#kernel.get<Supervisor>('supervisor');
  }
  get inbox(): Inbox {
    return this.#kernel.get<Inbox>('inbox');
  }
  get actions(): ActionRegistry {
    return this.#kernel.get<ActionRegistry>('actions');
  }
  get tracker(): TaskTracker {
    return this.#kernel.get<TaskTracker>('tracker');
  }
  get mcp(): McpHub {
    return this.#kernel.get<McpHub>('mcp');
  }
  get metrics(): Metrics {
    return this.#kernel.get<Metrics>('metrics');
  }

  #logOrPrint(plugin: string, err: unknown): void {
    try {
      this.log.error({ err, plugin }, 'disposer failed; teardown went on');
    } catch {
      console.error(`channeld: ${plugin}: disposer failed: ${errorMessage(err)}`);
    }
  }

  async #start(options: DaemonOptions): Promise<void> {
    if (this.#holder.loaded.config.cluster) {
      const { ClusterComposition } = await import('../cluster/compose.js');
      const cluster = new ClusterComposition({ config: () => this.#holder.loaded, hardStop: this.#hardStop.signal, instanceInfo: () => this.#instanceInfo() });
      this.#cluster = cluster;
      this.#gate = (c, a) => cluster.gate(c, a, this.config.kinds.of(c).exclusiveListener(c));
    }
    await this.#kernel.load(
      ...corePlugins({ holder: this.#holder, api: this, hardStop: this.#hardStop.signal, env: this.#env, ...(options.logger ? { logger: options.logger } : {}), ...(this.#cluster ? { cluster: this.#cluster } : {}) }),
      this.#statusPlugin(),
    );
    const cfg = this.#holder.loaded.config;
    const pidFile = join(cfg.daemon.state_dir, 'channeld.pid');
    writeFileSync(pidFile, `${process.pid}\n`, { mode: 0o600 });
    await this.#kernel.load({ name: 'pidfile', start: (ctx) => void ctx.effect(() => rmSync(pidFile, { force: true })) });
    for (const [name, agent] of Object.entries(cfg.agents)) if (agent.enabled) await this.#kernel.load(workspacePlugin(name, agent));
    const channels = cfg.channels.filter((c) => c.enabled);
    // Channels start concurrently: a slow one never holds back the others.
    await Promise.all(channels.map((c) => this.#kernel.load(channelPlugin(c, this.#holder, this.#removing, this.#gate))));
    this.#channelsLoaded = true;
    // Cluster mode: partitions are consumed once every channel can send replies.
    if (this.#cluster) await this.#kernel.load(this.#cluster.workPlugin());
    else this.dispatcher.recover();
    this.address = this.#kernel.get<HttpServer>('http').address!;
    this.log.info({ version: VERSION, channels: channels.map((c) => c.id), generation: this.#holder.generation }, 'channeld started');
  }

  #statusPlugin() {
    return {
      name: 'status-routes',
      inject: ['http', 'metrics', 'supervisor', 'dispatcher', 'config', 'actions'],
      start: (ctx: import('../kernel/plugin.js').PluginContext) => {
        const http = ctx.use<HttpServer>('http');
        ctx.effect(registerStatusRoutes(http, ctx.use('metrics'), () => this.status()));
        ctx.effect(registerAdminPage(http, () => this.#holder.loaded.secrets.get('http', 'admin_token'), () => this.status()));
      },
    };
  }

  turns() {
    return this.tracker.list();
  }

  async stopTurn(id: string) {
    return this.dispatcher.stopTurn(id) ?? (await this.#cluster?.stopTurn(id));
  }

  /** This instance as the other cluster members see it in its heartbeat. */
  #instanceInfo(): Record<string, unknown> {
    const snap = this.dispatcher.snapshot();
    return { generation: this.#holder.generation, pid: process.pid, in_flight: snap.inFlight, queued: snap.queued, started_at: this.#startedAt.toISOString() };
  }

  sessions() {
    const store = this.#kernel.get<Sessions>('sessions');
    return Promise.all(this.#holder.loaded.config.channels.map(async (c) => {
      const agent = agentOf(this.#holder.loaded.config, c.id);
      const rows = await store.summary(agent, `${c.id}:`);
      const last = Math.max(0, ...rows.map((r) => r.lastActiveAt));
      return { channel: c.id, agent, conversations: rows.length, sessions: rows.reduce((n, r) => n + r.sessions, 0), last_activity: last ? new Date(last).toISOString() : null };
    }));
  }

  conversation(agent: string, scope: string) {
    return this.#kernel.get<WorkspaceTable>('workspaces').byName.get(agent)?.conversationStatus(scope) ?? { Agent: `${agent} (not running)` };
  }

  async usage(filter: UsageFilter) {
    const ledger = this.#kernel.get<UsageLedger>('usage');
    const [rows, total] = await Promise.all([ledger.breakdown(filter), ledger.totals(filter)]);
    return { rows, total };
  }

  budget(agent: string) {
    return this.#kernel.get<WorkspaceTable>('workspaces').byName.get(agent)?.budget();
  }

  /**
   * Every configured channel is past its first connect attempt (an empty supervisor during
   * start-up is not ready), and the database takes writes.
   */
  ready(): boolean {
    return this.#channelsLoaded && this.supervisor.ready() && this.storage.health.ok;
  }

  get storage(): GroupCommit {
    return this.#kernel.get<GroupCommit>('storage');
  }

  status(): DaemonStatus {
    const snap = this.dispatcher.snapshot();
    return {
      version: VERSION,
      pid: process.pid,
      started_at: this.#startedAt.toISOString(),
      uptime_s: Math.round((Date.now() - this.#startedAt.getTime()) / 1000),
      generation: this.#holder.generation,
      ready: this.ready(),
      channels: this.supervisor.statuses().map((s) => ({ ...s, in_flight: snap.channels[s.id]?.inFlight ?? 0, queued: snap.channels[s.id]?.queued ?? 0 })),
      turns: { in_flight: snap.inFlight, queued: snap.queued, list: this.tracker.list() },
      agents: [...this.#kernel.get<WorkspaceTable>('workspaces').byName.values()].map((w) => w.status()),
      mcp_servers: this.mcp.status(),
      last_reload: this.#lastReload,
      storage: this.storage.status(),
      ...(this.#cluster?.status() ? { cluster: this.#cluster.status()! } : {}),
    };
  }

  /**
   * Re-reads the config file and applies the per-channel diff. Serialized: a reload asked
   * for while one runs is folded into one more reload after it.
   */
  reload(options: { dryRun?: boolean } = {}): Promise<ReloadResult> {
    if (options.dryRun) return Promise.resolve(this.#validate());
    if (this.#reloading) {
      this.#again = true;
      return this.#reloading;
    }
    const run = async (): Promise<ReloadResult> => {
      let result: ReloadResult;
      do {
        this.#again = false;
        result = await this.#reloadOnce();
      } while (this.#again && !this.#stopping);
      return result;
    };
    this.#reloading = run().finally(() => (this.#reloading = undefined));
    return this.#reloading;
  }

  /** The reload action's dry run: the file as the daemon would read it, in its own environment; nothing applied. */
  #validate(): ReloadResult {
    const file = this.#holder.loaded.file;
    const none = { added: [], removed: [], changed: [], agents: [] };
    try {
      const after = loadConfig(file, this.config.kinds, this.#env);
      const diff = diffChannels(this.#holder.loaded, after);
      const ids = (l: { id: string }[]) => l.map((c) => c.id);
      return { ok: true, dry_run: true, file, generation: this.#holder.generation, errors: [], ...none, added: ids(diff.added), removed: ids(diff.removed), changed: ids(diff.changed) };
    } catch (err) {
      return { ok: false, dry_run: true, file, generation: this.#holder.generation, errors: err instanceof ConfigError ? [...err.problems] : [errorMessage(err)], ...none };
    }
  }

  async #reloadOnce(): Promise<ReloadResult> {
    const at = new Date().toISOString();
    const before = this.#holder.loaded;
    let after: LoadedConfig;
    try {
      after = loadConfig(before.file, before.kinds, this.#env);
    } catch (err) {
      const errors = err instanceof ConfigError ? [...err.problems] : [errorMessage(err)];
      for (const e of errors) this.log.error({ reload: 'refused' }, e);
      this.#lastReload = { ok: false, at, errors };
      this.metrics.reloads.inc({ result: 'invalid' });
      return { ok: false, generation: this.#holder.generation, errors, added: [], removed: [], changed: [], agents: [] };
    }
    const refusal = reloadRefusal(before, after);
    if (refusal) {
      this.log.error({ reload: 'refused' }, refusal);
      this.#lastReload = { ok: false, at, errors: [refusal] };
      this.metrics.reloads.inc({ result: 'refused' });
      return { ok: false, generation: this.#holder.generation, errors: [refusal], added: [], removed: [], changed: [], agents: [] };
    }
    const diff = diffChannels(before, after);
    this.#holder.loaded = after;
    this.#holder.generation++;
    this.log.level = after.config.daemon.log_level;
    const agents = await this.#reloadWorkspaces(before, after);
    for (const ch of diff.removed) this.#removing.add(ch.id);
    await Promise.all([...diff.removed, ...diff.changed].map((ch) => this.#kernel.unload(`channel:${ch.id}`)));
    for (const ch of diff.removed) this.#removing.delete(ch.id);
    await Promise.all([...diff.added, ...diff.changed].map((ch) => this.#kernel.load(channelPlugin(ch, this.#holder, this.#removing, this.#gate))));
    this.#lastReload = { ok: true, at, errors: [] };
    this.metrics.reloads.inc({ result: 'applied' });
    const ids = (l: { id: string }[]) => l.map((c) => c.id);
    const result = { ok: true, generation: this.#holder.generation, errors: [], added: ids(diff.added), removed: ids(diff.removed), changed: ids(diff.changed), agents };
    this.log.info({ ...result, unchanged: ids(diff.unchanged) }, 'config reloaded');
    return result;
  }

  /**
   * Agents whose section (or API key) changed are reloaded as a unit: their workspace plugin
   * is unloaded and loaded anew. No listener is touched; running turns keep the old one.
   */
  async #reloadWorkspaces(before: LoadedConfig, after: LoadedConfig): Promise<string[]> {
    const fingerprint = (l: LoadedConfig, name: string) => JSON.stringify(l.config.agents[name] ?? null) + (l.secrets.get(`agents.${name}`, 'api_key') ?? '');
    const names = new Set([...Object.keys(before.config.agents), ...Object.keys(after.config.agents)]);
    const changed: string[] = [];
    const table = this.#kernel.get<WorkspaceTable>('workspaces');
    for (const name of names) {
      if (fingerprint(before, name) === fingerprint(after, name)) {
        // Prompt files live outside the config: an unchanged agent still re-reads them.
        try {
          table.byName.get(name)?.reloadPromptFiles();
        } catch (err) {
          this.log.error({ err, agent: name }, 'prompt files could not be read again; the previous ones stay');
        }
        continue;
      }
      changed.push(name);
      await this.#kernel.unload(`workspace:${name}`);
      const agent = after.config.agents[name];
      if (agent?.enabled) await this.#kernel.load(workspacePlugin(name, agent));
      else await this.mcp.sync(name, []);
    }
    return changed;
  }

  /**
   * Graceful stop: stop taking messages, let running turns finish for `shutdown_grace_ms`
   * (then cancel them with the stop marker), then unload everything in reverse order.
   */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      await this.#reloading?.catch(() => {});
      const graceMs = this.#holder.loaded.config.daemon.shutdown_grace_ms;
      // Turns get the grace to finish, cancelled ones as long again to flush their final
      // text; then retries stop, so a platform that keeps refusing cannot hold the exit.
      const hard = setTimeout(() => this.#hardStop.abort(), 2 * graceMs);
      try {
        await this.dispatcher.shutdown(graceMs);
      } finally {
        clearTimeout(hard);
        this.#hardStop.abort();
      }
      await this.#kernel.stop();
    })();
    return this.#stopping;
  }

  /** Stops final-text retries at once (a second signal). */
  abortNow(): void {
    this.#hardStop.abort();
  }
}
