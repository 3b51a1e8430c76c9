import { CodedError } from '../contracts/errors.js';
import type { Plugin } from './plugin.js';

/** What the plan is checked against besides the plugins themselves. */
export interface PlanContext {
  /** Services already provided (by running plugins) when planning an addition: service → plugin. */
  available?: ReadonlyMap<string, string>;
  /**
   * Every service name the composition declares (the keys of its service map). When given,
   * a plugin that injects or provides any other name is refused before anything starts.
   */
  known?: ReadonlySet<string>;
}

/**
 * Orders plugins so every provider starts before the plugins that inject its services.
 * Checked before anything starts: an unknown service name, a missing service, a duplicate
 * provider or a cycle is a coded error naming the plugins.
 */
export function planStart(plugins: readonly Plugin[], context: PlanContext = {}): Plugin[] {
  const providers = new Map<string, string>(context.available);
  const byName = new Map<string, Plugin>();
  const { known } = context;
  for (const p of plugins) {
    if (byName.has(p.name)) throw new CodedError('KERNEL_DUPLICATE_PLUGIN', `two plugins are named "${p.name}"`);
    byName.set(p.name, p);
    if (known) {
      for (const s of [...(p.inject ?? []), ...(p.provides ?? [])]) {
        if (!known.has(s))
          throw new CodedError(
            'KERNEL_UNKNOWN_SERVICE',
            `plugin "${p.name}" names "${s}", which is not a declared service (declared: ${[...known].join(', ')})`,
          );
      }
    }
    for (const s of p.provides ?? []) {
      const other = providers.get(s);
      if (other) throw new CodedError('KERNEL_DUPLICATE_PROVIDER', `service "${s}" is provided by both "${other}" and "${p.name}"`);
      providers.set(s, p.name);
    }
  }
  for (const p of plugins) {
    for (const s of p.inject ?? []) {
      if (!providers.has(s)) throw new CodedError('KERNEL_MISSING_SERVICE', `plugin "${p.name}" injects "${s}", which no plugin provides`);
    }
  }
  const order: Plugin[] = [];
  const mark = new Map<string, 'visiting' | 'done'>();
  const visit = (p: Plugin, trail: string[]) => {
    const m = mark.get(p.name);
    if (m === 'done') return;
    if (m === 'visiting') {
      const cycle = [...trail.slice(trail.indexOf(p.name)), p.name];
      throw new CodedError('KERNEL_CYCLE', `plugins depend on each other: ${cycle.join(' → ')}`);
    }
    mark.set(p.name, 'visiting');
    for (const s of p.inject ?? []) {
      const dep = byName.get(providers.get(s)!);
      if (dep) visit(dep, [...trail, p.name]);
    }
    mark.set(p.name, 'done');
    order.push(p);
  };
  for (const p of plugins) visit(p, []);
  return order;
}
