import type { AddressInfo } from 'node:net';
import { VERSION } from '../util/version.js';
import type { ChannelKinds } from '../config/kinds.js';
import { loadConfig, type LoadedConfig } from '../config/load.js';
import { errorMessage } from '../contracts/errors.js';
import { Kernel } from '../kernel/kernel.js';
import type { LoggerOptions } from '../observe/logger.js';
import { channelComponent } from './channels.js';
import { coreComponents } from './composition.js';
import { LiveConfig } from './config-service.js';
import { pidFileComponent } from './pidfile.js';
import { upgradeComponent } from './upgrade/component.js';
import { loadPluginFolders, pluginFolderComponent } from './plugin-folders.js';
import { Reloader, type ReloadResult } from './reload.js';
import { serviceNames, type DaemonComponent, type Services } from './services.js';
import { topologyComponents, topologyWorkComponent } from './topology.js';
import { workspaceComponent } from './workspaces.js';

export type { ReloadResult } from './reload.js';

export { RESTART_KEYS } from './reload.js';

export interface DaemonOptions {
  configFile: string;
  /** The channel kinds this build runs (the entry point hands them in). */
  kinds: ChannelKinds;
  env?: NodeJS.ProcessEnv;
  logger?: Partial<LoggerOptions>;
}

/**
 * The running daemon's lifecycle: it composes the kernel (core components, one component per
 * plugin folder, per agent and per channel), starts it, and stops it gracefully. Everything else is
 * a service: reload, status, the management API. The getters are for the command line and
 * tests.
 */
export class Daemon {
  readonly #kernel: Kernel<Services>;
  readonly #config: LiveConfig;
  readonly #hardStop = new AbortController();
  readonly #reloader: Reloader;
  #stopping: Promise<void> | undefined;
  address!: AddressInfo;

  private constructor(loaded: LoadedConfig, env: NodeJS.ProcessEnv) {
    this.#config = new LiveConfig(loaded, env);
    this.#kernel = new Kernel<Services>({ services: serviceNames, onDisposeError: (component, err) => this.#logOrPrint(component, err) });
    this.#reloader = new Reloader(this.#kernel);
  }

  /** Loads the config and plugin folders, starts the core and every enabled agent and channel; ready() tells when /readyz turns 200. */
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

  async #core(options: DaemonOptions): Promise<DaemonComponent[]> {
    const common = coreComponents(this.#config, { hardStop: this.#hardStop.signal, reloader: this.#reloader, logger: options.logger });
    return [...common, ...(await topologyComponents(this.#config.config))];
  }

  async #start(options: DaemonOptions): Promise<void> {
    // Plugin folders are imported before anything starts: a bad one is a config error.
    const folders = await loadPluginFolders(this.#config.loaded);
    await this.#kernel.load(...(await this.#core(options)));
    await this.#kernel.load(pidFileComponent, upgradeComponent, ...folders.map(pluginFolderComponent));
    const cfg = this.#config.config;
    for (const [name, agent] of Object.entries(cfg.agents)) if (agent.enabled) await this.#kernel.load(workspaceComponent(name, agent));
    const channels = cfg.channels.filter((c) => c.enabled);
    // Channels start concurrently: a slow one never holds back the others.
    await Promise.all(channels.map((c) => this.#kernel.load(channelComponent(c))));
    this.#kernel.get('status').channelsLoaded = true;
    // Recovered and shared work is taken up once every channel can send replies.
    await this.#kernel.load(topologyWorkComponent);
    this.address = this.#kernel.get('http').address!;
    this.log.info(
      { version: VERSION, channels: channels.map((c) => c.id), plugins: folders.map((f) => f.definition.name), generation: this.#config.generation },
      'channeld started',
    );
  }

  #logOrPrint(component: string, err: unknown): void {
    try {
      this.log.error({ err, component }, 'disposer failed; teardown went on');
    } catch {
      console.error(`channeld: ${component}: disposer failed: ${errorMessage(err)}`);
    }
  }

  get log() {
    return this.#kernel.get('logger');
  }
  get config(): LoadedConfig {
    return this.#config.loaded;
  }
  get dispatcher() {
    return this.#kernel.get('dispatcher');
  }
  get supervisor() {
    return this.#kernel.get('supervisor');
  }
  /** The SQLite inbox (empty in cluster mode: the shared inbox lives in NATS). */
  get inbox() {
    return this.#kernel.get('inbox');
  }
  get actions() {
    return this.#kernel.get('actions');
  }
  get tracker() {
    return this.#kernel.get('tracker');
  }
  get mcp() {
    return this.#kernel.get('mcp');
  }
  get metrics() {
    return this.#kernel.get('metrics');
  }
  get storage() {
    return this.#kernel.get('storage');
  }
  /** The one HTTP server (its routes and their declared webhook authentication). */
  get http() {
    return this.#kernel.get('http');
  }

  /** Both ends of `channeld upgrade` (src/daemon/upgrade/). */
  get upgrade() {
    return this.#kernel.get('upgrade');
  }

  /** What management actions see; the same object the HTTP and slash faces call. */
  get api() {
    return this.#kernel.get('management');
  }
  status() {
    return this.#kernel.get('status').status();
  }
  ready(): boolean {
    return this.#kernel.get('status').ready();
  }
  turns() {
    return this.tracker.list();
  }

  /** Re-reads the config file and applies it (see Reloader); `dryRun` only validates. */
  reload(options: { dryRun?: boolean } = {}): Promise<ReloadResult> {
    return this.#reloader.reload(options);
  }

  /**
   * Graceful stop: stop taking messages, let running turns finish for `shutdown_grace_ms`
   * (then cancel them with the stop marker), after an upgrade let the HTTP connections
   * drain, then unload everything in reverse order.
   */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      await this.#reloader.close();
      const graceMs = this.#config.config.daemon.shutdown_grace_ms;
      // Turns get the grace to finish, cancelled ones as long again to flush their final
      // text; then retries stop, so a platform that keeps refusing cannot hold the exit.
      const hard = setTimeout(() => this.#hardStop.abort(), 2 * graceMs);
      try {
        await this.dispatcher.shutdown(graceMs);
      } finally {
        clearTimeout(hard);
        this.#hardStop.abort();
      }
      // After an upgrade this process's routes answer the HTTP connections it still has
      // until each moved to the new process (src/observe/http-drain.ts); the drain began at
      // the hand-over, alongside the turns.
      await this.upgrade.predecessor.drained();
      await this.#kernel.stop();
    })();
    return this.#stopping;
  }

  /** Stops final-text retries at once (a second signal). */
  abortNow(): void {
    this.#hardStop.abort();
  }
}
