import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { localUrl, runFiles } from '../util/run-files.js';
import { defineComponent } from './services.js';

/**
 * `<state_dir>/channeld.pid` and `channeld.url` while the daemon runs (see runFiles): the CLI
 * finds the daemon through them, and `channeld reload` signals through the pid when the HTTP
 * server does not answer. Removed when the daemon stops.
 */
export const pidFileComponent = defineComponent({
  name: 'pidfile',
  // After the store: opening the database is what creates state_dir. After http: its bound address.
  inject: ['config', 'storage', 'http'],
  start: (ctx) => {
    const files = runFiles(ctx.use('config').config.daemon.state_dir);
    const bound = ctx.use('http').address;
    writeFileSync(files.pid, `${process.pid}\n`, { mode: 0o600 });
    if (bound) writeFileSync(files.url, `${localUrl(bound.address, bound.port)}\n`, { mode: 0o600 });
    ctx.effect(() => {
      // After an upgrade the files are the new process's (it wrote them while this one ran): kept.
      let mine = true;
      try {
        mine = readFileSync(files.pid, 'utf8').trim() === String(process.pid);
      } catch {}
      if (mine) for (const f of [files.url, files.reload, files.pid]) rmSync(f, { force: true });
    });
  },
});
