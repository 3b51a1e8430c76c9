import { renameSync, writeFileSync } from 'node:fs';
import { runFiles, type ReloadOutcome } from '../util/run-files.js';
import type { Daemon } from './daemon.js';

let hups = 0;

/**
 * A SIGHUP has no reply: its outcome goes to `<state_dir>/channeld.reload.json`, where
 * `channeld reload` (which sent the signal) waits for it, so a refused reload exits 78 there too.
 */
async function reloadOnSignal(daemon: Daemon): Promise<void> {
  const result = await daemon.reload();
  const outcome: ReloadOutcome = { id: `${process.pid}-${++hups}-${Date.now()}`, ok: result.ok, generation: result.generation, errors: result.errors };
  try {
    // Whole or not at all: the CLI polls the file, so it is written aside and renamed into place.
    const file = runFiles(daemon.config.config.daemon.state_dir).reload;
    writeFileSync(`${file}.tmp`, `${JSON.stringify(outcome)}\n`, { mode: 0o600 });
    renameSync(`${file}.tmp`, file);
  } catch (err) {
    daemon.log.warn({ err }, 'the SIGHUP reload outcome could not be written for channeld reload');
  }
}

/**
 * Runs a started daemon until a signal ends it: SIGHUP reloads, the first SIGTERM/SIGINT
 * stops gracefully (0, or 1 when the stop failed), a second one exits at once (1).
 * Resolves with the exit status; the listeners are removed before it resolves.
 */
export function untilSignalled(daemon: Daemon): Promise<number> {
  const log = daemon.log;
  return new Promise<number>((resolve) => {
    let signals = 0;
    const done = (code: number) => {
      process.off('SIGTERM', onStop);
      process.off('SIGINT', onStop);
      process.off('SIGHUP', onHup);
      resolve(code);
    };
    const onStop = (signal: NodeJS.Signals) => {
      signals++;
      if (signals > 1) {
        log.warn({ signal }, 'second signal: exiting now');
        daemon.abortNow();
        log.flush();
        done(1);
        return;
      }
      log.info({ signal }, 'stopping: finishing running turns');
      daemon.stop().then(
        () => {
          log.info('stopped');
          done(0);
        },
        (err: unknown) => {
          log.error({ err }, 'stop failed');
          done(1);
        },
      );
    };
    const onHup = () => {
      log.info('SIGHUP: reloading the config');
      reloadOnSignal(daemon).catch((err: unknown) => log.error({ err }, 'SIGHUP reload failed'));
    };
    process.on('SIGTERM', onStop);
    process.on('SIGINT', onStop);
    process.on('SIGHUP', onHup);
  });
}
