import { CodedError, errorMessage } from '../contracts/errors.js';
import { planStart } from './plan.js';
import type { Disposer, Component, ComponentContext, ComponentState, ServiceMap } from './component.js';

export interface KernelOptions<S extends object = ServiceMap> {
  /**
   * Every service name the composition declares (the keys of `S`, at run time). Given, a
   * component naming any other service fails the plan check before anything starts.
   */
  services?: ReadonlySet<keyof S & string>;
  /** Default per-component start timeout. */
  startTimeoutMs?: number;
  /** Told about every disposer that fails; teardown keeps going. */
  onDisposeError?: (component: string, err: unknown) => void;
}

interface Slot<S extends object> {
  component: Component<S>;
  state: ComponentState;
  effects: Disposer[];
  controller: AbortController;
  services: string[];
}

/**
 * The component kernel: computes a start plan, starts components in order, records each
 * component's effects, and unloads in reverse. A failed start rolls back the failing component's
 * effects and then every component started in that call, newest first.
 */
export class Kernel<S extends object = ServiceMap> {
  readonly #slots = new Map<string, Slot<S>>();
  readonly #services = new Map<string, unknown>();
  readonly #providers = new Map<string, string>();
  /** Active components in start order. */
  readonly #started: string[] = [];
  readonly #startTimeoutMs: number;
  readonly #onDisposeError: (component: string, err: unknown) => void;
  readonly #known: ReadonlySet<string> | undefined;

  constructor(options: KernelOptions<S> = {}) {
    this.#startTimeoutMs = options.startTimeoutMs ?? 30_000;
    this.#known = options.services;
    this.#onDisposeError = options.onDisposeError ?? (() => {});
  }

  state(name: string): ComponentState | undefined {
    return this.#slots.get(name)?.state;
  }

  /** Names of active components in start order. */
  get started(): readonly string[] {
    return [...this.#started];
  }

  /** A running service, for the composition root (components get theirs through `use`). */
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
   * Plans and starts `components`; services of already active components may be injected.
   * On failure everything this call started is rolled back, and the error is rethrown.
   */
  async load(...components: Component<S>[]): Promise<void> {
    const available = new Map([...this.#providers].filter(([, p]) => this.#slots.get(p)?.state === 'active'));
    const fresh = components.filter((p) => this.#slots.get(p.name)?.state !== 'active');
    const order = planStart(fresh as readonly Component[], { available, ...(this.#known ? { known: this.#known } : {}) }) as unknown as Component<S>[];
    const startedNow: string[] = [];
    for (const component of order) {
      try {
        await this.#startOne(component);
        startedNow.push(component.name);
      } catch (err) {
        for (const name of startedNow.reverse()) await this.#dispose(name);
        throw err;
      }
    }
  }

  async #startOne(component: Component<S>): Promise<void> {
    const slot: Slot<S> = { component, state: 'loading', effects: [], controller: new AbortController(), services: [] };
    this.#slots.set(component.name, slot);
    // The type of `ctx` already limits use/provide to the declared names; these checks
    // hold the same line for components written in JavaScript or cast past the types.
    const ctx: ComponentContext<S> = {
      name: component.name,
      signal: slot.controller.signal,
      use: (service) => {
        if (!component.inject?.includes(service))
          throw new CodedError('KERNEL_UNDECLARED_USE', `component "${component.name}" uses "${String(service)}" without injecting it; add it to inject`);
        return this.#get(service);
      },
      provide: (service, value) => {
        const name = service as string;
        if (!component.provides?.includes(service))
          throw new CodedError('KERNEL_UNDECLARED_PROVIDE', `component "${component.name}" provides "${name}" without declaring it; add it to provides`);
        // A second provide would silently replace the value its dependents may already hold.
        if (slot.services.includes(name))
          throw new CodedError('KERNEL_PROVIDED_TWICE', `component "${component.name}" provides "${name}" twice; provide it once`);
        this.#services.set(name, value);
        this.#providers.set(name, component.name);
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
    const timeoutMs = component.startTimeoutMs ?? this.#startTimeoutMs;
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        component.start(ctx),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new CodedError('KERNEL_START_TIMEOUT', `component "${component.name}" did not start within ${timeoutMs} ms`)),
            timeoutMs,
          );
        }),
      ]);
      const missing = (component.provides ?? []).filter((s) => !slot.services.includes(s as string));
      if (missing.length) throw new CodedError('KERNEL_MISSING_SERVICE', `component "${component.name}" declared but did not provide ${missing.join(', ')}`);
    } catch (err) {
      await this.#rollback(slot);
      slot.state = 'failed';
      if (err instanceof CodedError && err.code === 'KERNEL_START_TIMEOUT') throw err;
      throw new CodedError('KERNEL_START_FAILED', `component "${component.name}" failed to start: ${errorMessage(err)}`, { cause: err });
    } finally {
      clearTimeout(timer);
    }
    slot.state = 'active';
    this.#started.push(component.name);
  }

  async #rollback(slot: Slot<S>): Promise<void> {
    slot.controller.abort(new CodedError('COMPONENT_UNLOADING', `component "${slot.component.name}" is unloading`));
    const effects = slot.effects.splice(0).reverse();
    for (const dispose of effects) {
      try {
        await dispose();
      } catch (err) {
        this.#onDisposeError(slot.component.name, err);
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

  /** Components that inject a service of `name`, transitively, including `name`. */
  dependentsOf(name: string): string[] {
    const out = new Set([name]);
    let grew = true;
    while (grew) {
      grew = false;
      for (const n of this.#started) {
        if (out.has(n)) continue;
        const inj = (this.#slots.get(n)!.component.inject ?? []) as readonly string[];
        if (inj.some((s) => out.has(this.#providers.get(s) ?? ''))) {
          out.add(n);
          grew = true;
        }
      }
    }
    return [...out];
  }

  /** Unloads `name` and exactly the components that depend on it, newest first. Returns their names. */
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
