import { CodedError, errorMessage } from '../contracts/errors.js';
import type { PluginDefinition } from '../contracts/plugin-folder.js';
import { isMessageHook } from '../contracts/message-hooks.js';
import { MessageHooks } from './message-hooks.js';
import type { PluginFailure } from './plugin-failure.js';
import type { Runtime } from '../runtime/runtime.js';

export type { PluginFailure } from './plugin-failure.js';

interface Contribution {
  /** Where it came from, for errors: the plugin folder's path as configured. */
  source: string;
  definition: PluginDefinition;
}

/**
 * Runs `work`, telling `report` about a throw before passing it on unchanged (the turn
 * still answers "Something went wrong" or the model still reads the tool error).
 */
async function reported<T>(work: () => T | Promise<T>, report: (err: unknown) => void): Promise<T> {
  try {
    return await work();
  } catch (err) {
    report(err);
    throw err;
  }
}

/** Registers one definition on one runtime; all or nothing. Returns the disposer. */
function apply(runtime: Runtime, c: Contribution, agent: string, onError?: (f: PluginFailure) => void): () => void {
  const disposers: Array<() => void> = [];
  const undo = () => {
    for (const d of disposers.splice(0).reverse()) d();
  };
  const { definition: d } = c;
  const report = (kind: PluginFailure['kind'], name: string, phase: string) => (err: unknown) =>
    onError?.({ plugin: d.name, source: c.source, kind, name, phase, agent, err });
  try {
    for (const m of d.modes ?? []) disposers.push(runtime.modes.register(m));
    for (const t of d.tools ?? [])
      disposers.push(runtime.tools.register({ ...t, run: (input, ctx) => reported(() => t.run(input, ctx), report('tool', t.name, 'tool')) }));
    for (const h of d.hooks ?? []) {
      if (isMessageHook(h)) continue; // daemon-wide: Extensions.messages runs them
      disposers.push(runtime.hooks.register({ ...h, run: (ctx) => reported(() => h.run(ctx), report('hook', h.name, h.phase)) }));
    }
    for (const cmd of d.commands ?? [])
      disposers.push(
        runtime.commands.register({ ...cmd, handler: (ctx, args) => reported(() => cmd.handler(ctx, args), report('command', cmd.name, 'command')) }),
      );
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
  readonly #onError: ((f: PluginFailure) => void) | undefined;
  /** The message hooks (`message_received`, `message_sent`) of every definition in force. */
  readonly messages: MessageHooks;

  /** `onError` hears of every throw from a plugin's hook, command or tool (the daemon logs and counts it). */
  constructor(onError?: (f: PluginFailure) => void) {
    this.#onError = onError;
    this.messages = new MessageHooks((f) => onError?.(f));
  }

  /** Adds a plugin folder's definition to every attached runtime; throws (adding nothing) on a clash. */
  add(source: string, definition: PluginDefinition): () => void {
    const c: Contribution = { source, definition };
    const done: Array<{ applied: Map<Contribution, () => void>; undo: () => void }> = [];
    try {
      for (const [runtime, r] of this.#runtimes) done.push({ applied: r.applied, undo: apply(runtime, c, r.agent, this.#onError) });
    } catch (err) {
      for (const x of done.reverse()) x.undo();
      throw err;
    }
    for (const x of done) x.applied.set(c, x.undo);
    this.#contributions.add(c);
    const undoMessages = this.messages.add(definition.name, source, (definition.hooks ?? []).filter(isMessageHook));
    return () => {
      if (!this.#contributions.delete(c)) return;
      undoMessages();
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
      for (const c of this.#contributions) applied.set(c, apply(runtime, c, agent, this.#onError));
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
