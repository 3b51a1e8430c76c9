import { defineComponent } from '../services.js';
import { Upgrades } from './service.js';

/** `channeld upgrade` and SIGUSR2 (docs/OPERATIONS.md "Upgrading"): the `upgrade` service and the management action's binding. */
export const upgradeComponent = defineComponent({
  name: 'upgrade',
  provides: ['upgrade'],
  inject: ['config', 'logger', 'http', 'dispatcher', 'management', 'storage', 'inbox', 'reload'],
  start: (ctx) => {
    const config = ctx.use('config');
    const upgrades = new Upgrades({
      log: ctx.use('logger'),
      timeoutMs: () => config.config.daemon.upgrade_timeout_ms,
      cluster: config.config.cluster !== undefined,
      http: ctx.use('http'),
      dispatcher: ctx.use('dispatcher'),
      storage: ctx.use('storage'),
      inbox: ctx.use('inbox'),
      reloading: () => ctx.use('reload').applying,
    });
    ctx.effect(ctx.use('management').bindUpgrade((options) => upgrades.predecessor.upgrade(options)));
    // A stop by any other way than a signal (the daemon's own stop): no upgrade outlives it.
    ctx.effect(() => upgrades.predecessor.stop());
    ctx.provide('upgrade', upgrades);
  },
});
