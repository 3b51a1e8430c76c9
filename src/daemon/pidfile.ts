import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { definePlugin } from './services.js';

/**
 * `<state_dir>/channeld.pid` while the daemon runs: `channeld reload` signals through it
 * when the HTTP server does not answer. Removed when the daemon stops.
 */
export const pidFilePlugin = definePlugin({
  name: 'pidfile',
  // After the store: opening the database is what creates state_dir.
  inject: ['config', 'storage'],
  start: (ctx) => {
    const pidFile = join(ctx.use('config').config.daemon.state_dir, 'channeld.pid');
    writeFileSync(pidFile, `${process.pid}\n`, { mode: 0o600 });
    ctx.effect(() => rmSync(pidFile, { force: true }));
  },
});
