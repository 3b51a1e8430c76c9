import { describe, expect, it } from 'vitest';
import { planStart } from '../../../src/kernel/plan.js';
import type { Component } from '../../../src/kernel/component.js';
import { coreComponents, singleNodeComponents } from '../../../src/daemon/composition.js';
import { pidFileComponent } from '../../../src/daemon/pidfile.js';
import { upgradeComponent } from '../../../src/daemon/upgrade/component.js';
import { defineComponent, serviceNames, type DaemonComponent, type Services } from '../../../src/daemon/services.js';
import { LiveConfig } from '../../../src/daemon/config-service.js';
import { parseConfig } from '../../../src/config/load.js';
import { Reloader } from '../../../src/daemon/reload.js';
import { Kernel } from '../../../src/kernel/kernel.js';
import { kinds } from '../../helpers/kinds.js';

const live = new LiveConfig(parseConfig('', '/tmp/daemon.config.toml', kinds, {}), {});
// The lists the daemon itself loads (src/daemon/daemon.ts), not a copy of them.
const core: DaemonComponent[] = [
  ...coreComponents(live, { hardStop: new AbortController().signal, reloader: new Reloader(new Kernel<Services>({ services: serviceNames })) }),
  ...singleNodeComponents(),
  pidFileComponent,
  upgradeComponent,
];

describe('the daemon composition', () => {
  it('plans: every injected service is declared and provided, with no cycle', () => {
    const order = planStart(core as Component[], { known: serviceNames }).map((p) => p.name);
    expect(order.indexOf('config')).toBeLessThan(order.indexOf('logger'));
    expect(order.indexOf('store')).toBeLessThan(order.indexOf('pidfile'));
    expect(order.indexOf('dispatcher')).toBeLessThan(order.indexOf('management-api'));
  });

  it('fails the plan when a service it needs is left out', () => {
    expect(() => planStart(core.filter((p) => p.name !== 'single-node') as Component[], { known: serviceNames })).toThrow(
      /component "dispatcher" injects "topology", which no component provides/,
    );
  });

  it('a component context allows only the injected services (type level)', () => {
    const p = defineComponent({
      name: 'typed',
      inject: ['config'],
      start: (ctx) => {
        const generation: number = ctx.use('config').generation;
        // @ts-expect-error "logger" is not in inject
        ctx.use('logger');
        // @ts-expect-error nothing is in provides
        ctx.provide('logger', undefined);
        void generation;
      },
    });
    // @ts-expect-error "db" is not a service name
    defineComponent({ name: 'unknown', inject: ['db'], start() {} });
    expect(p.inject).toEqual(['config']);
  });
});
