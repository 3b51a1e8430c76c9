import { describe, expect, it } from 'vitest';
import { Kernel } from '../../../src/kernel/kernel.js';
import type { Component } from '../../../src/kernel/component.js';

/** A small service map, as a composition declares one. */
interface Shop {
  prices: Map<string, number>;
  till: { total(items: string[]): number };
}
const shopNames = new Set<keyof Shop>(['prices', 'till']);

const prices: Component<Shop, never, 'prices'> = { name: 'prices', provides: ['prices'], start: (ctx) => ctx.provide('prices', new Map([['tea', 2]])) };
const till: Component<Shop, 'prices', 'till'> = {
  name: 'till',
  inject: ['prices'],
  provides: ['till'],
  start: (ctx) => {
    const p = ctx.use('prices');
    ctx.provide('till', { total: (items) => items.reduce((n, i) => n + (p.get(i) ?? 0), 0) });
  },
};

describe('a kernel over a typed service map', () => {
  it('gives each service its declared type', async () => {
    const k = new Kernel<Shop>({ services: shopNames });
    await k.load(till, prices);
    const t: Shop['till'] = k.get('till');
    expect(t.total(['tea', 'tea', 'cake'])).toBe(4);
    await k.stop();
  });

  it('refuses at plan time a component naming a service the map does not declare', async () => {
    const k = new Kernel<Shop>({ services: shopNames });
    const stray = { name: 'stray', inject: ['cash'], start() {} } as unknown as Component<Shop>;
    await expect(k.load(prices, stray)).rejects.toMatchObject({ code: 'KERNEL_UNKNOWN_SERVICE' });
    expect(k.started).toEqual([]);
  });

  it('limits use() and provide() to the declared names at the type level', () => {
    // Compiled by `npm run typecheck`: each line below must be a type error.
    const sneaky: Component<Shop, 'prices'> = {
      name: 'sneaky',
      inject: ['prices'],
      start: (ctx) => {
        // @ts-expect-error "till" is not in inject
        ctx.use('till');
        // @ts-expect-error a service gets a value of its declared type only
        ctx.provide('prices', 'not a map');
      },
    };
    // @ts-expect-error the kernel holds only the map's names
    expect(() => new Kernel<Shop>().get('cash')).toThrow(/"cash" is not running/);
    expect(sneaky.name).toBe('sneaky');
  });
});
