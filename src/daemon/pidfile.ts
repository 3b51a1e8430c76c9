import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { localUrl, runFiles } from '../util/run-files.js';
import { defineComponent } from './services.js';

const readOr = (file: string): string | undefined => {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
};

/** Writes `text` to `file`, or removes it when there is none. */
const putBack = (file: string, text: string | undefined): void => {
  if (text === undefined) rmSync(file, { force: true });
  else writeFileSync(file, text, { mode: 0o600 });
};

/**
 * `<state_dir>/channeld.pid` and `channeld.url` while the daemon runs (see runFiles): the CLI
 * finds the daemon through them, and `channeld reload` signals through the pid when the HTTP
 * server does not answer. Removed when the daemon stops.
 */
export const pidFileComponent = defineComponent({
  name: 'pidfile',
  // After the store: opening the database is what creates state_dir. After http: its bound address.
  inject: ['config', 'storage', 'http', 'upgrade', 'logger'],
  start: (ctx) => {
    const files = runFiles(ctx.use('config').config.daemon.state_dir);
    const bound = ctx.use('http').address;
    const upgrade = ctx.use('upgrade');
    const log = ctx.use('logger');
    // An upgrade's new process writes over the old one's files; if it stops before it took
    // over (the upgrade failed) they go back, the old process serving on.
    const previous = upgrade.successor ? { pid: readOr(files.pid), url: readOr(files.url) } : undefined;
    const write = () => {
      writeFileSync(files.pid, `${process.pid}\n`, { mode: 0o600 });
      if (bound) writeFileSync(files.url, `${localUrl(bound.address, bound.port)}\n`, { mode: 0o600 });
    };
    write();
    // A failed upgrade's new process wrote its own files; one that could not put them back
    // (SIGKILLed past its stop's bound) left its dead pid there, and the CLI found no daemon.
    ctx.effect(
      upgrade.onRecovered(() => {
        if (readOr(files.pid)?.trim() === String(process.pid)) return;
        try {
          write();
        } catch (err) {
          log.warn({ err }, 'upgrade failed: channeld.pid could not be written back');
        }
      }),
    );
    ctx.effect(() => {
      // After an upgrade the files are the new process's (it wrote them while this one ran): kept.
      let mine = true;
      try {
        mine = readFileSync(files.pid, 'utf8').trim() === String(process.pid);
      } catch {}
      if (!mine) return;
      if (previous && !upgrade.tookOver) {
        putBack(files.url, previous.url);
        putBack(files.pid, previous.pid);
        return;
      }
      for (const f of [files.url, files.reload, files.pid]) rmSync(f, { force: true });
    });
  },
});
