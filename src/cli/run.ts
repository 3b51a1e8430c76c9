import type { ChannelKinds } from '../config/kinds.js';
import { prettyDestination } from '../observe/logger.js';
import { Daemon } from './daemon.js';
import { exitCodeFor, reportStartFailure } from './exit.js';

/**
 * `channeld run`: starts the daemon and wires the signals. Resolves only when the process
 * should exit, with its exit status.
 */
export async function runDaemon(configFile: string, kinds: ChannelKinds): Promise<number> {
  // JSON for journald; pretty lines for a person at a terminal.
  let daemon: Daemon;
  try {
    daemon = await Daemon.start({ configFile, kinds, ...(process.stdout.isTTY ? { logger: { destination: await prettyDestination() } } : {}) });
  } catch (err) {
    // Start failed; Daemon.start has stopped what was running. Exit now rather than wait for
    // handles an SDK may have left: 78 when the operator must fix something, 1 otherwise.
    reportStartFailure(err);
    process.exit(exitCodeFor(err));
  }
  const log = daemon.log;
  const { address, port } = daemon.address;
  const host = address.includes(':') ? `[${address}]` : address;
  // The first enabled channel whose kind serves a page at `/` says where to open it.
  const page = daemon.config.config.channels.filter((c) => c.enabled).map((c) => daemon.config.kinds.of(c).page).find((p) => p !== undefined);
  if (page) log.info({ url: `http://${host}:${port}/` }, `${page}: http://${host}:${port}/`);
  void daemon.supervisor.firstAttempts().then(() => log.info({ url: `http://${host}:${port}/readyz` }, 'ready'));

  return new Promise<number>((resolve) => {
    let signals = 0;
    const onStop = (signal: NodeJS.Signals) => {
      signals++;
      if (signals > 1) {
        log.warn({ signal }, 'second signal: exiting now');
        daemon.abortNow();
        log.flush();
        resolve(1);
        return;
      }
      log.info({ signal }, 'stopping: finishing running turns');
      daemon.stop().then(
        () => {
          log.info('stopped');
          resolve(0);
        },
        (err: unknown) => {
          log.error({ err }, 'stop failed');
          resolve(1);
        },
      );
    };
    process.on('SIGTERM', onStop);
    process.on('SIGINT', onStop);
    process.on('SIGHUP', () => {
      log.info('SIGHUP: reloading the config');
      void daemon.reload();
    });
  }).then((code) => {
    // Anything still holding the event loop (a platform SDK's keep-alive) must not delay exit.
    process.exit(code);
  });
}
