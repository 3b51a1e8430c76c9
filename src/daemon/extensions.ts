import { CodedError, errorMessage } from '../contracts/errors.js';
import type { PluginDefinition } from '../contracts/plugin-folder.js';
import type { Runtime } from '../runtime/runtime.js';

interface Contribution {
  /** Where it came from, for errors: the plugin folder's path as configured. */
  source: string;
  definition: PluginDefinition;
}

/** Registers one definition on one runtime; all or nothing. Returns the disposer. */
function apply(runtime: Runtime, c: Contribution, agent: string): () => void {
  const disposers: Array<() => void> = [];
  const undo = () => {
    for (const d of disposers.splice(0).reverse()) d();
  };
  const { definition: d } = c;
  try {
    for (const m of d.modes ?? []) disposers.push(runtime.modes.register(m));
    for (const t of d.tools ?? []) disposers.push(runtime.tools.register(t));
    for (const h of d.hooks ?? []) disposers.push(runtime.hooks.register(h));
    for (const cmd of d.commands ?? []) disposers.push(runtime.commands.register(cmd));
  } catch (err) {
    undo();
    const code = err instanceof CodedError ? err.code : 'PLUGIN_FOLDER_INVALID';
    throw new CodedError(code, `plugin folder ${c.source} ("${d.name}") cannot be added to agent "${agent}": ${errorMessage(err)}`, { cause: err });
  }
  return undo;
}

/**
 * The `extensions` service: the modes, tools, hooks and commands that plugin folders add,
 * kept on every running workspace's runtime. A definition added later reaches the runtimes
 * already attached; a runtime attached later gets every definition; each disposer takes
 * back exactly what it added.
 */
export class Extensions {
  readonly #contributions = new Set<Contribution>();
  readonly #runtimes = new Map<Runtime, { agent: string; applied: Map<Contribution, () => void> }>();

  /** Adds a plugin folder's definition to every attached runtime; throws (adding nothing) on a clash. */
  add(source: string, definition: PluginDefinition): () => void {
    const c: Contribution = { source, definition };
    const done: Array<{ applied: Map<Contribution, () => void>; undo: () => void }> = [];
    try {
      for (const [runtime, r] of this.#runtimes) done.push({ applied: r.applied, undo: apply(runtime, c, r.agent) });
    } catch (err) {
      for (const x of done.reverse()) x.undo();
      throw err;
    }
    for (const x of done) x.applied.set(c, x.undo);
    this.#contributions.add(c);
    return () => {
      if (!this.#contributions.delete(c)) return;
      for (const r of this.#runtimes.values()) {
        r.applied.get(c)?.();
        r.applied.delete(c);
      }
    };
  }

  /** Applies every definition to `runtime` (agent `agent`) until the returned disposer runs. */
  attach(runtime: Runtime, agent: string): () => void {
    const applied = new Map<Contribution, () => void>();
    try {
      for (const c of this.#contributions) applied.set(c, apply(runtime, c, agent));
    } catch (err) {
      for (const undo of [...applied.values()].reverse()) undo();
      throw err;
    }
    this.#runtimes.set(runtime, { agent, applied });
    return () => {
      if (!this.#runtimes.delete(runtime)) return;
      for (const undo of [...applied.values()].reverse()) undo();
    };
  }

  /** The names of the definitions in force, in the order they were added. */
  names(): string[] {
    return [...this.#contributions].map((c) => c.definition.name);
  }
}
