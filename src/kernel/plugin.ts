/** A disposer releases what one effect acquired. It may be async; it runs at most once. */
export type Disposer = () => void | Promise<void>;

/** What a plugin sees while it starts and runs. */
export interface PluginContext {
  readonly name: string;
  /** Aborted when this plugin is being unloaded: long waits started by the plugin listen to it. */
  readonly signal: AbortSignal;
  /** A service this plugin declared in `inject`. */
  use<T>(service: string): T;
  /** Publishes a service this plugin declared in `provides`. */
  provide<T>(service: string, value: T): void;
  /**
   * Registers a disposer, owned by this plugin; unload runs them in reverse order.
   * Returns a function that disposes this one effect early.
   */
  effect(dispose: Disposer): () => Promise<void>;
}

/** A unit of composition: declares what it provides and injects, starts once, is unloaded once. */
export interface Plugin {
  readonly name: string;
  readonly provides?: readonly string[];
  readonly inject?: readonly string[];
  /** Overrides the kernel's start timeout for this plugin. */
  readonly startTimeoutMs?: number;
  start(ctx: PluginContext): void | Promise<void>;
}

/** pending → loading → active → disposed, or loading → failed (its effects already rolled back). */
export type PluginState = 'pending' | 'loading' | 'active' | 'failed' | 'disposed';
