import { CodedError } from '../contracts/errors.js';
import type { Component } from './component.js';

/** What the plan is checked against besides the components themselves. */
export interface PlanContext {
  /** Services already provided (by running components) when planning an addition: service → component. */
  available?: ReadonlyMap<string, string>;
  /**
   * Every service name the composition declares (the keys of its service map). When given,
   * a component that injects or provides any other name is refused before anything starts.
   */
  known?: ReadonlySet<string>;
}

/**
 * Orders components so every provider starts before the components that inject its services.
 * Checked before anything starts: an unknown service name, a missing service, a duplicate
 * provider or a cycle is a coded error naming the components.
 */
export function planStart(components: readonly Component[], context: PlanContext = {}): Component[] {
  const providers = new Map<string, string>(context.available);
  const byName = new Map<string, Component>();
  const { known } = context;
  for (const p of components) {
    if (byName.has(p.name)) throw new CodedError('KERNEL_DUPLICATE_COMPONENT', `two components are named "${p.name}"`);
    byName.set(p.name, p);
    if (known) {
      for (const s of [...(p.inject ?? []), ...(p.provides ?? [])]) {
        if (!known.has(s))
          throw new CodedError(
            'KERNEL_UNKNOWN_SERVICE',
            `component "${p.name}" names "${s}", which is not a declared service (declared: ${[...known].join(', ')})`,
          );
      }
    }
    for (const s of p.provides ?? []) {
      const other = providers.get(s);
      if (other) throw new CodedError('KERNEL_DUPLICATE_PROVIDER', `service "${s}" is provided by both "${other}" and "${p.name}"`);
      providers.set(s, p.name);
    }
  }
  for (const p of components) {
    for (const s of p.inject ?? []) {
      if (!providers.has(s)) throw new CodedError('KERNEL_MISSING_SERVICE', `component "${p.name}" injects "${s}", which no component provides`);
    }
  }
  const order: Component[] = [];
  const mark = new Map<string, 'visiting' | 'done'>();
  const visit = (p: Component, trail: string[]) => {
    const m = mark.get(p.name);
    if (m === 'done') return;
    if (m === 'visiting') {
      const cycle = [...trail.slice(trail.indexOf(p.name)), p.name];
      throw new CodedError('KERNEL_CYCLE', `components depend on each other: ${cycle.join(' → ')}`);
    }
    mark.set(p.name, 'visiting');
    for (const s of p.inject ?? []) {
      const dep = byName.get(providers.get(s)!);
      if (dep) visit(dep, [...trail, p.name]);
    }
    mark.set(p.name, 'done');
    order.push(p);
  };
  for (const p of components) visit(p, []);
  return order;
}
