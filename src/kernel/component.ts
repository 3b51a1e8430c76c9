/** A disposer releases what one effect acquired. It may be async; it runs at most once. */
export type Disposer = () => void | Promise<void>;

/**
 * The services a kernel holds, by name: an interface mapping each service name to its
 * type (the daemon's is `Services` in src/daemon/services.ts). The untyped default lets
 * tests and small kernels use any name.
 */
// biome-ignore lint/suspicious/noExplicitAny: any is the point of the untyped default
export type ServiceMap = Record<string, any>;

/**
 * What a component sees while it starts and runs. `I` are the services it declared in
 * `inject`, `P` those in `provides`: using or providing any other is a type error, and the
 * kernel refuses it at run time too.
 */
export interface ComponentContext<S extends object = ServiceMap, I extends keyof S = keyof S, P extends keyof S = keyof S> {
  readonly name: string;
  /** Aborted when this component is being unloaded: long waits started by the component listen to it. */
  readonly signal: AbortSignal;
  /** A service this component declared in `inject`. */
  use<K extends I>(service: K): S[K];
  /** Publishes a service this component declared in `provides`. */
  provide<K extends P>(service: K, value: S[K]): void;
  /**
   * Registers a disposer, owned by this component; unload runs them in reverse order.
   * Returns a function that disposes this one effect early.
   */
  effect(dispose: Disposer): () => Promise<void>;
}

/**
 * A component, the kernel's unit of composition: declares what it provides and injects,
 * starts once, is unloaded once. (A plugin is something else: a folder an operator adds,
 * src/contracts/plugin-folder.ts, which the daemon loads as one component.)
 */
export interface Component<S extends object = ServiceMap, I extends keyof S = keyof S, P extends keyof S = keyof S> {
  readonly name: string;
  readonly provides?: readonly P[];
  readonly inject?: readonly I[];
  /** Overrides the kernel's start timeout for this component. */
  readonly startTimeoutMs?: number;
  // A method (not a property) on purpose: a component with a narrower context is still a Component<S>.
  start(ctx: ComponentContext<S, I, P>): void | Promise<void>;
}

/** pending → loading → active → disposed, or loading → failed (its effects already rolled back). */
export type ComponentState = 'pending' | 'loading' | 'active' | 'failed' | 'disposed';
