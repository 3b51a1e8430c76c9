import type { Daemon } from './daemon.js';

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
      void daemon.reload();
    };
    process.on('SIGTERM', onStop);
    process.on('SIGINT', onStop);
    process.on('SIGHUP', onHup);
  });
}
