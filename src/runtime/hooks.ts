import type { Hook, Phase } from '../contracts/hooks.js';
import { CodedError } from '../contracts/errors.js';

/**
 * Hooks per phase, ordered topologically by before/after, then priority, then name, so
 * the order is deterministic. Cycles and duplicate names are rejected at registration;
 * the order is cached until the next registration.
 */
export class HookRegistry {
  readonly #hooks = new Map<Phase, Hook[]>();
  readonly #cache = new Map<Phase, Hook[]>();

  register(hook: Hook): () => void {
    const list = this.#hooks.get(hook.phase) ?? [];
    if (list.some((h) => h.name === hook.name)) throw new CodedError('HOOK_DUPLICATE', `hook "${hook.name}" is already registered in ${hook.phase}`);
    const next = [...list, hook];
    const order = sortHooks(next); // throws on a cycle before anything changes
    this.#hooks.set(hook.phase, next);
    this.#cache.set(hook.phase, order);
    return () => {
      const cur = this.#hooks.get(hook.phase) ?? [];
      const rest = cur.filter((h) => h !== hook);
      this.#hooks.set(hook.phase, rest);
      this.#cache.set(hook.phase, sortHooks(rest));
    };
  }

  /** The cached order for a phase. */
  ordered(phase: Phase): readonly Hook[] {
    return this.#cache.get(phase) ?? [];
  }
}

function compare(a: Hook, b: Hook): number {
  return (a.priority ?? 100) - (b.priority ?? 100) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
}

/** Kahn's algorithm; among ready hooks the lowest (priority, name) goes first. */
export function sortHooks(hooks: readonly Hook[]): Hook[] {
  const byName = new Map(hooks.map((h) => [h.name, h]));
  const edges = new Map<string, Set<string>>(hooks.map((h) => [h.name, new Set()]));
  const indegree = new Map(hooks.map((h) => [h.name, 0]));
  const edge = (from: string, to: string) => {
    if (!byName.has(from) || !byName.has(to) || edges.get(from)!.has(to)) return;
    edges.get(from)!.add(to);
    indegree.set(to, indegree.get(to)! + 1);
  };
  for (const h of hooks) {
    for (const b of h.before ?? []) edge(h.name, b);
    for (const a of h.after ?? []) edge(a, h.name);
  }
  const ready = hooks.filter((h) => indegree.get(h.name) === 0).sort(compare);
  const out: Hook[] = [];
  while (ready.length) {
    const h = ready.shift()!;
    out.push(h);
    for (const n of edges.get(h.name)!) {
      indegree.set(n, indegree.get(n)! - 1);
      if (indegree.get(n) === 0) {
        ready.push(byName.get(n)!);
        ready.sort(compare);
      }
    }
  }
  if (out.length < hooks.length) {
    const stuck = hooks.filter((h) => !out.includes(h)).map((h) => h.name);
    throw new CodedError('HOOK_CYCLE', `hooks ${stuck.join(', ')} in ${hooks[0]!.phase} order each other in a cycle`);
  }
  return out;
}
