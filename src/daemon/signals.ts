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
  const upgrades = daemon.upgrade.predecessor;
  return new Promise<number>((resolve) => {
    let signals = 0;
    const done = (code: number) => {
      process.off('SIGTERM', onStop);
      process.off('SIGINT', onStop);
      process.off('SIGHUP', onHup);
      process.off('SIGUSR2', onUpgrade);
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
      // An upgrade whose new process is not ready yet fails (that process is stopped), and
      // none starts any more: it would take over from a daemon being stopped.
      upgrades.stop();
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
    // SIGUSR2 upgrades as `channeld upgrade` does (its outcome is logged); once the new
    // process took over, this one stops as on SIGTERM and exits 0.
    const onUpgrade = () => {
      log.info('SIGUSR2: upgrading to the new build');
      void upgrades.upgrade();
    };
    void upgrades.handedOver.then(() => {
      if (signals > 0) return;
      log.info('upgraded: finishing running turns here, new messages go to the new process');
      daemon.stop().then(
        () => upgrades.finish().then(() => done(0)),
        (err: unknown) => {
          log.error({ err }, 'stop after the upgrade failed');
          void upgrades.finish().then(() => done(1));
        },
      );
    });
    process.on('SIGTERM', onStop);
    process.on('SIGINT', onStop);
    process.on('SIGHUP', onHup);
    process.on('SIGUSR2', onUpgrade);
  });
}
