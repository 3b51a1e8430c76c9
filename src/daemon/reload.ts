import { diffChannels } from '../config/diff.js';
import { loadConfig, type LoadedConfig } from '../config/load.js';
import { CodedError, ConfigError, errorMessage } from '../contracts/errors.js';
import type { Kernel } from '../kernel/kernel.js';
import { channelComponent } from './channels.js';
import type { ReloadResult, ReloadService, Services } from './services.js';
import { SUCCESSOR_ENV } from './upgrade/successor.js';
import { workspaceComponent } from './workspaces.js';

export type { ReloadResult } from './services.js';

/**
 * Keys a running daemon cannot change: the HTTP server and the database stay where they
 * are, and plugin folders are imported once (an ES module cannot be loaded again).
 */
export const RESTART_KEYS = [
  ['[http] listen', (c: LoadedConfig) => c.config.http.listen],
  ['[daemon] state_dir', (c: LoadedConfig) => c.config.daemon.state_dir],
  ['[daemon] plugins', (c: LoadedConfig) => JSON.stringify(c.config.daemon.plugins)],
  ['[observe]', (c: LoadedConfig) => JSON.stringify(c.config.observe)],
] as const;

/** Why a valid new config must not be applied by a reload, or undefined. */
export function reloadRefusal(before: LoadedConfig, after: LoadedConfig): string | undefined {
  const restart = RESTART_KEYS.filter(([, get]) => get(before) !== get(after)).map(([key]) => key);
  if (restart.length)
    return `${after.file}: ${restart.join(' and ')} changed; ${restart.length > 1 ? 'they take' : 'it takes'} effect only on a restart (systemctl restart channeld). Nothing was applied; undo the change or restart.`;
  const enabled = (l: LoadedConfig) => l.config.channels.filter((c) => c.enabled).length;
  if (enabled(after) === 0 && enabled(before) > 0) {
    return `${after.file}: no channel is enabled in the new config, so this reload would stop every channel (an empty or truncated file?). Nothing was applied; to stop the daemon use systemctl stop channeld.`;
  }
  return undefined;
}

const ids = (l: { id: string }[]) => l.map((c) => c.id);

/**
 * The `reload` service: re-reads the config file and applies the per-channel diff through
 * the kernel (changed channels and agents are unloaded and loaded anew). Serialized: a
 * reload asked for while one runs is folded into one more reload after it.
 */
export class Reloader implements ReloadService {
  #running: Promise<ReloadResult> | undefined;
  #again = false;
  #closed = false;

  constructor(private readonly kernel: Kernel<Services>) {}

  reload(options: { dryRun?: boolean } = {}): Promise<ReloadResult> {
    if (options.dryRun) return Promise.resolve(this.#validate());
    const busy = this.#busy();
    if (busy) return Promise.resolve().then(() => this.#refuse(busy));
    if (this.#running) {
      this.#again = true;
      return this.#running;
    }
    const run = async (): Promise<ReloadResult> => {
      let result: ReloadResult;
      do {
        this.#again = false;
        // One folded in may find an upgrade begun meanwhile.
        const busy = this.#busy();
        result = busy ? this.#refuse(busy) : await this.#reloadOnce();
      } while (this.#again && !this.#closed);
      return result;
    };
    this.#running = run().finally(() => (this.#running = undefined));
    return this.#running;
  }

  get applying(): boolean {
    return this.#running !== undefined;
  }

  /** No reload is folded in after this; resolves once the running one (if any) ended. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#running?.catch(() => {});
  }

  /**
   * Why no reload may run now, or undefined. While an upgrade is under way a channel's
   * listener may already run in the new process: a reload here would replace its parked gate
   * with one that runs, and the listener would run in both. After the hand-over (or once
   * this daemon stops) listeners started here would outlive the stop's own list, and an `ok`
   * would say a config applies that the process now serving does not run: the new process
   * is the one to reload. That one, until its hand-over finished, is still being handed
   * listeners and their state, and holds back the old process's conversations: a reload
   * there would restart a channel whose listener is on its way, or apply a config the old
   * process, still finishing turns, never had.
   */
  #busy(): string | undefined {
    if (this.#closed) return new CodedError('DAEMON_SHUTTING_DOWN', 'this daemon is stopping, so it reloads nothing').message;
    let phase: 'idle' | 'upgrading' | 'handedOver' = 'idle';
    let successor: 'idle' | 'handingOver' | 'failed' = 'idle';
    try {
      const upgrade = this.kernel.get('upgrade');
      phase = upgrade.predecessor.phase;
      successor = upgrade.successorPhase;
    } catch {
      // Not started yet (or stopped): there is no upgrade, unless an upgrade started this
      // process: its HTTP server (and the reload action) serve before the upgrade service starts.
      if (process.env[SUCCESSOR_ENV]) successor = 'handingOver';
    }
    if (successor !== 'idle')
      return new CodedError(
        'UPGRADE_IN_PROGRESS',
        successor === 'failed'
          ? 'a reload is refused in the new process of an upgrade that failed: the old process serves on and stops this one; reload once it has (channeld reload then reaches the old process)'
          : 'a reload is refused while the upgrade that started this process is still handing over to it (this process is not ready yet, or the old one still runs turns); reload once the upgrade has finished, when the old process has exited',
      ).message;
    if (phase === 'upgrading')
      return new CodedError(
        'UPGRADE_IN_PROGRESS',
        'a reload is refused while an upgrade is under way; reload once it has finished: channeld upgrade returned, and the old process (or, if it failed, the new one) has exited',
      ).message;
    if (phase === 'handedOver')
      return new CodedError(
        'DAEMON_SHUTTING_DOWN',
        'this process handed over to the new process of an upgrade and is stopping; reload the new one (channeld reload reaches it)',
      ).message;
    return undefined;
  }

  #refuse(reason: string): ReloadResult {
    const live = this.kernel.get('config');
    this.kernel.get('logger').warn({ reload: 'refused' }, reason);
    this.kernel.get('metrics').reloads.inc({ result: 'refused' });
    return { ok: false, generation: live.generation, errors: [reason], added: [], removed: [], changed: [], agents: [] };
  }

  /**
   * The reload action's dry run: the file as the daemon would read it, in its own
   * environment, and the refusal a real reload would give; nothing applied. Plugin folders
   * are not imported here (an ES module cannot be unloaded from the running daemon): a
   * changed `[daemon] plugins` is refused as needing a restart, and a local `channeld check`
   * imports them.
   */
  #validate(): ReloadResult {
    const live = this.kernel.get('config');
    const file = live.loaded.file;
    const none = { added: [], removed: [], changed: [], agents: [] };
    try {
      const after = loadConfig(file, live.loaded.kinds, live.env);
      const refusal = reloadRefusal(live.loaded, after);
      if (refusal) return { ok: false, dry_run: true, file, generation: live.generation, errors: [refusal], ...none };
      const diff = diffChannels(live.loaded, after);
      return {
        ok: true,
        dry_run: true,
        file,
        generation: live.generation,
        errors: [],
        ...none,
        added: ids(diff.added),
        removed: ids(diff.removed),
        changed: ids(diff.changed),
      };
    } catch (err) {
      return {
        ok: false,
        dry_run: true,
        file,
        generation: live.generation,
        errors: err instanceof ConfigError ? [...err.problems] : [errorMessage(err)],
        ...none,
      };
    }
  }

  async #reloadOnce(): Promise<ReloadResult> {
    const live = this.kernel.get('config');
    const log = this.kernel.get('logger');
    const metrics = this.kernel.get('metrics');
    const at = new Date().toISOString();
    const before = live.loaded;
    const refused = (errors: string[], result: 'invalid' | 'refused'): ReloadResult => {
      for (const e of errors) log.error({ reload: 'refused' }, e);
      live.lastReload = { ok: false, at, errors };
      metrics.reloads.inc({ result });
      return { ok: false, generation: live.generation, errors, added: [], removed: [], changed: [], agents: [] };
    };
    let after: LoadedConfig;
    try {
      after = loadConfig(before.file, before.kinds, live.env);
    } catch (err) {
      return refused(err instanceof ConfigError ? [...err.problems] : [errorMessage(err)], 'invalid');
    }
    const refusal = reloadRefusal(before, after);
    if (refusal) return refused([refusal], 'refused');
    const diff = diffChannels(before, after);
    live.replace(after);
    log.level = after.config.daemon.log_level;
    const agents = await this.#reloadWorkspaces(before, after);
    const channels = this.kernel.get('channels');
    for (const ch of diff.removed) channels.removing.add(ch.id);
    await Promise.all([...diff.removed, ...diff.changed].map((ch) => this.kernel.unload(`channel:${ch.id}`)));
    for (const ch of diff.removed) channels.removing.delete(ch.id);
    await Promise.all([...diff.added, ...diff.changed].map((ch) => this.kernel.load(channelComponent(ch))));
    live.lastReload = { ok: true, at, errors: [] };
    metrics.reloads.inc({ result: 'applied' });
    const result = {
      ok: true,
      generation: live.generation,
      errors: [],
      added: ids(diff.added),
      removed: ids(diff.removed),
      changed: ids(diff.changed),
      agents,
    };
    log.info({ ...result, unchanged: ids(diff.unchanged) }, 'config reloaded');
    return result;
  }

  /**
   * Agents whose section (or API key) changed are reloaded as a unit: their workspace component
   * is unloaded and loaded anew. No listener is touched; running turns keep the old one.
   */
  async #reloadWorkspaces(before: LoadedConfig, after: LoadedConfig): Promise<string[]> {
    const fingerprint = (l: LoadedConfig, name: string) => JSON.stringify(l.config.agents[name] ?? null) + (l.secrets.get(`agents.${name}`, 'api_key') ?? '');
    const names = new Set([...Object.keys(before.config.agents), ...Object.keys(after.config.agents)]);
    const changed: string[] = [];
    const table = this.kernel.get('workspaces');
    const log = this.kernel.get('logger');
    for (const name of names) {
      if (fingerprint(before, name) === fingerprint(after, name)) {
        // Prompt files live outside the config: an unchanged agent still re-reads them.
        try {
          table.byName.get(name)?.reloadPromptFiles();
        } catch (err) {
          log.error({ err, agent: name }, 'prompt files could not be read again; the previous ones stay');
        }
        // So do skills: SKILL.md folders added, changed or removed take effect for new turns.
        try {
          table.byName.get(name)?.reloadSkills();
        } catch (err) {
          log.error({ err, agent: name }, 'skills_dir could not be read again; the previous skills stay');
        }
        continue;
      }
      changed.push(name);
      await this.kernel.unload(`workspace:${name}`);
      const agent = after.config.agents[name];
      if (agent?.enabled) await this.kernel.load(workspaceComponent(name, agent));
      else await this.kernel.get('mcp').sync(name, []);
    }
    return changed;
  }
}
