import type { ChannelKinds } from '../config/kinds.js';
import { Daemon } from '../daemon/daemon.js';
import { untilSignalled } from '../daemon/signals.js';
import { reportFailureToOld } from '../daemon/upgrade/successor.js';
import { prettyDestination, underJournald } from '../observe/logger.js';
import { ProcessWarnings } from '../observe/warnings.js';
import { applyWhenReady, parseV8Flags, V8_FLAGS_ENV, type V8Flags } from '../observe/v8-flags.js';
import { exitCodeFor, reportStartFailure } from './exit.js';

/**
 * `channeld run`: starts the daemon and runs it until a signal ends it. Resolves only when
 * the process should exit, with its exit status.
 */
export async function runDaemon(configFile: string, kinds: ChannelKinds): Promise<number> {
  let daemon: Daemon;
  let v8Flags: V8Flags;
  // From here Node's warnings become log lines: stdout stays one JSON object per line.
  const warnings = new ProcessWarnings().capture();
  try {
    // Read first, from the environment Daemon.start reads too (the memory trimmer takes its
    // collection from the same variable): a wrong flag is refused (78) before anything starts.
    v8Flags = parseV8Flags(process.env[V8_FLAGS_ENV]);
    // JSON (with syslog priorities under journald); pretty lines for a person at a terminal.
    const logger = process.stdout.isTTY ? { destination: await prettyDestination() } : { journald: underJournald() };
    daemon = await Daemon.start({ configFile, kinds, logger });
  } catch (err) {
    // Start failed; Daemon.start has stopped what was running. Exit now rather than wait for
    // handles an SDK may have left: 78 when the operator must fix something, 1 otherwise.
    reportStartFailure(err);
    // Started by `channeld upgrade`: the old process tells the operator why.
    await reportFailureToOld(err);
    process.exit(exitCodeFor(err));
  }
  const log = daemon.log;
  warnings.route(log);
  const { address, port } = daemon.address;
  const host = address.includes(':') ? `[${address}]` : address;
  // The first enabled channel whose kind serves a page at `/` says where to open it.
  const page = daemon.config.config.channels
    .filter((c) => c.enabled)
    .map((c) => daemon.config.kinds.of(c).page)
    .find((p) => p !== undefined);
  if (page) log.info({ url: `http://${host}:${port}/` }, `${page}: http://${host}:${port}/`);
  void daemon.supervisor.firstAttempts().then(() => {
    log.info({ url: `http://${host}:${port}/readyz` }, 'ready');
    // After start-up: set earlier, it would have made Node compile its built-in modules from source (src/observe/v8-flags.ts).
    applyWhenReady(v8Flags);
    // systemd's READY=1, or (started by an upgrade) the old process's cue to hand over.
    daemon.upgrade.ready().catch((err: unknown) => log.error({ err }, 'upgrade hand-over failed'));
  });
  const code = await untilSignalled(daemon);
  // Anything still holding the event loop (a platform SDK's keep-alive) must not delay exit.
  process.exit(code);
}
