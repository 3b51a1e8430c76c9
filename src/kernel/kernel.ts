import { CodedError, errorMessage } from '../contracts/errors.js';
import { planStart } from './plan.js';
import type { Disposer, Plugin, PluginContext, PluginState, ServiceMap } from './plugin.js';

export interface KernelOptions<S extends object = ServiceMap> {
  /**
   * Every service name the composition declares (the keys of `S`, at run time). Given, a
   * plugin naming any other service fails the plan check before anything starts.
   */
  services?: ReadonlySet<keyof S & string>;
  /** Default per-plugin start timeout. */
  startTimeoutMs?: number;
  /** Told about every disposer that fails; teardown keeps going. */
  onDisposeError?: (plugin: string, err: unknown) => void;
}

interface Slot<S extends object> {
  plugin: Plugin<S>;
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
export class Kernel<S extends object = ServiceMap> {
  readonly #slots = new Map<string, Slot<S>>();
  readonly #services = new Map<string, unknown>();
  readonly #providers = new Map<string, string>();
  /** Active plugins in start order. */
  readonly #started: string[] = [];
  readonly #startTimeoutMs: number;
  readonly #onDisposeError: (plugin: string, err: unknown) => void;
  readonly #known: ReadonlySet<string> | undefined;

  constructor(options: KernelOptions<S> = {}) {
    this.#startTimeoutMs = options.startTimeoutMs ?? 30_000;
    this.#known = options.services;
    this.#onDisposeError = options.onDisposeError ?? (() => {});
  }

  state(name: string): PluginState | undefined {
    return this.#slots.get(name)?.state;
  }

  /** Names of active plugins in start order. */
  get started(): readonly string[] {
    return [...this.#started];
  }

  /** A running service, for the composition root (plugins get theirs through `use`). */
  get<K extends keyof S & string>(service: K): S[K] {
    return this.#get(service);
  }

  #get<K extends keyof S>(service: K): S[K] {
    const name = service as string;
    if (!this.#services.has(name)) throw new CodedError('KERNEL_MISSING_SERVICE', `service "${name}" is not running`);
    // The one cast: `provide` only ever stores an S[K] under K.
    return this.#services.get(name) as S[K];
  }

  /**
   * Plans and starts `plugins`; services of already active plugins may be injected.
   * On failure everything this call started is rolled back, and the error is rethrown.
   */
  async load(...plugins: Plugin<S>[]): Promise<void> {
    const available = new Map([...this.#providers].filter(([, p]) => this.#slots.get(p)?.state === 'active'));
    const fresh = plugins.filter((p) => this.#slots.get(p.name)?.state !== 'active');
    const order = planStart(fresh as readonly Plugin[], { available, ...(this.#known ? { known: this.#known } : {}) }) as unknown as Plugin<S>[];
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

  async #startOne(plugin: Plugin<S>): Promise<void> {
    const slot: Slot<S> = { plugin, state: 'loading', effects: [], controller: new AbortController(), services: [] };
    this.#slots.set(plugin.name, slot);
    // The type of `ctx` already limits use/provide to the declared names; these checks
    // hold the same line for plugins written in JavaScript or cast past the types.
    const ctx: PluginContext<S> = {
      name: plugin.name,
      signal: slot.controller.signal,
      use: (service) => {
        if (!plugin.inject?.includes(service))
          throw new CodedError('KERNEL_UNDECLARED_USE', `plugin "${plugin.name}" uses "${String(service)}" without injecting it; add it to inject`);
        return this.#get(service);
      },
      provide: (service, value) => {
        const name = service as string;
        if (!plugin.provides?.includes(service))
          throw new CodedError('KERNEL_UNDECLARED_PROVIDE', `plugin "${plugin.name}" provides "${name}" without declaring it; add it to provides`);
        // A second provide would silently replace the value its dependents may already hold.
        if (slot.services.includes(name)) throw new CodedError('KERNEL_PROVIDED_TWICE', `plugin "${plugin.name}" provides "${name}" twice; provide it once`);
        this.#services.set(name, value);
        this.#providers.set(name, plugin.name);
        slot.services.push(name);
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
      const missing = (plugin.provides ?? []).filter((s) => !slot.services.includes(s as string));
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

  async #rollback(slot: Slot<S>): Promise<void> {
    slot.controller.abort(new CodedError('PLUGIN_UNLOADING', `plugin "${slot.plugin.name}" is unloading`));
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
    if (slot?.state !== 'active') return;
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
        const inj = (this.#slots.get(n)!.plugin.inject ?? []) as readonly string[];
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
