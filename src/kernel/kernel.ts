import { CodedError, errorMessage } from '../contracts/errors.js';
import { planStart } from './plan.js';
import type { Disposer, Plugin, PluginContext, PluginState } from './plugin.js';

export interface KernelOptions {
  /** Default per-plugin start timeout. */
  startTimeoutMs?: number;
  /** Told about every disposer that fails; teardown keeps going. */
  onDisposeError?: (plugin: string, err: unknown) => void;
}

interface Slot {
  plugin: Plugin;
  state: PluginState;
  effects: Disposer[];
  controller: AbortController;
  services: string[];
}

/**
 * The plugin kernel: computes a start plan, starts plugins in order, records each
 * plugin's effects, and unloads in reverse. A failed start rolls back the failing plugin's
 * effects and then every plugin started in that call, newest first.
 */
export class Kernel {
  readonly #slots = new Map<string, Slot>();
  readonly #services = new Map<string, unknown>();
  readonly #providers = new Map<string, string>();
  /** Active plugins in start order. */
  readonly #started: string[] = [];
  readonly #startTimeoutMs: number;
  readonly #onDisposeError: (plugin: string, err: unknown) => void;

  constructor(options: KernelOptions = {}) {
    this.#startTimeoutMs = options.startTimeoutMs ?? 30_000;
    this.#onDisposeError = options.onDisposeError ?? (() => {});
  }

  state(name: string): PluginState | undefined {
    return this.#slots.get(name)?.state;
  }

  /** Names of active plugins in start order. */
  get started(): readonly string[] {
    return [...this.#started];
  }

  get<T>(service: string): T {
    if (!this.#services.has(service)) throw new CodedError('KERNEL_MISSING_SERVICE', `service "${service}" is not running`);
    return this.#services.get(service) as T;
  }

  /**
   * Plans and starts `plugins`; services of already active plugins may be injected.
   * On failure everything this call started is rolled back, and the error is rethrown.
   */
  async load(...plugins: Plugin[]): Promise<void> {
    const available = new Map([...this.#providers].filter(([, p]) => this.#slots.get(p)?.state === 'active'));
    const order = planStart(plugins.filter((p) => this.#slots.get(p.name)?.state !== 'active'), available);
    const startedNow: string[] = [];
    for (const plugin of order) {
      try {
        await this.#startOne(plugin);
        startedNow.push(plugin.name);
      } catch (err) {
        for (const name of startedNow.reverse()) await this.#dispose(name);
        throw err;
      }
    }
  }

  async #startOne(plugin: Plugin): Promise<void> {
    const slot: Slot = { plugin, state: 'loading', effects: [], controller: new AbortController(), services: [] };
    this.#slots.set(plugin.name, slot);
    const ctx: PluginContext = {
      name: plugin.name,
      signal: slot.controller.signal,
      use: <T>(service: string) => {
        if (!plugin.inject?.includes(service)) throw new CodedError('KERNEL_UNDECLARED_USE', `plugin "${plugin.name}" uses "${service}" without injecting it`);
        return this.get<T>(service);
      },
      provide: (service, value) => {
        if (!plugin.provides?.includes(service)) throw new CodedError('KERNEL_UNDECLARED_PROVIDE', `plugin "${plugin.name}" provides "${service}" without declaring it`);
        this.#services.set(service, value);
        this.#providers.set(service, plugin.name);
        slot.services.push(service);
      },
      effect: (dispose) => {
        let done = false;
        const once: Disposer = async () => {
          if (done) return;
          done = true;
          await dispose();
        };
        slot.effects.push(once);
        return async () => {
          slot.effects = slot.effects.filter((d) => d !== once);
          await once();
        };
      },
    };
    const timeoutMs = plugin.startTimeoutMs ?? this.#startTimeoutMs;
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        plugin.start(ctx),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new CodedError('KERNEL_START_TIMEOUT', `plugin "${plugin.name}" did not start within ${timeoutMs} ms`)), timeoutMs);
        }),
      ]);
      const missing = (plugin.provides ?? []).filter((s) => !slot.services.includes(s));
      if (missing.length) throw new CodedError('KERNEL_MISSING_SERVICE', `plugin "${plugin.name}" declared but did not provide ${missing.join(', ')}`);
    } catch (err) {
      await this.#rollback(slot);
      slot.state = 'failed';
      if (err instanceof CodedError && err.code === 'KERNEL_START_TIMEOUT') throw err;
      throw new CodedError('KERNEL_START_FAILED', `plugin "${plugin.name}" failed to start: ${errorMessage(err)}`, { cause: err });
    } finally {
      clearTimeout(timer);
    }
    slot.state = 'active';
    this.#started.push(plugin.name);
  }

  async #rollback(slot: Slot): Promise<void> {
    slot.controller.abort(new CodedError('DAEMON_SHUTTING_DOWN', `plugin "${slot.plugin.name}" is unloading`));
    const effects = slot.effects.splice(0).reverse();
    for (const dispose of effects) {
      try {
        await dispose();
      } catch (err) {
        this.#onDisposeError(slot.plugin.name, err);
      }
    }
    for (const s of slot.services.splice(0)) {
      this.#services.delete(s);
      this.#providers.delete(s);
    }
  }

  async #dispose(name: string): Promise<void> {
    const slot = this.#slots.get(name);
    if (!slot || slot.state !== 'active') return;
    slot.state = 'disposed';
    this.#started.splice(this.#started.indexOf(name), 1);
    await this.#rollback(slot);
  }

  /** Plugins that inject a service of `name`, transitively, including `name`. */
  dependentsOf(name: string): string[] {
    const out = new Set([name]);
    let grew = true;
    while (grew) {
      grew = false;
      for (const n of this.#started) {
        if (out.has(n)) continue;
        const inj = this.#slots.get(n)!.plugin.inject ?? [];
        if (inj.some((s) => out.has(this.#providers.get(s) ?? ''))) {
          out.add(n);
          grew = true;
        }
      }
    }
    return [...out];
  }

  /** Unloads `name` and exactly the plugins that depend on it, newest first. Returns their names. */
  async unload(name: string): Promise<string[]> {
    const doomed = new Set(this.dependentsOf(name));
    const order = this.#started.filter((n) => doomed.has(n)).reverse();
    for (const n of order) await this.#dispose(n);
    return order;
  }

  /** Unloads everything in reverse start order. Idempotent. */
  async stop(): Promise<void> {
    for (const n of [...this.#started].reverse()) await this.#dispose(n);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}
