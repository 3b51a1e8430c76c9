#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { CodedError, ConfigError, errorMessage } from '../errors.js';
import { runCheck } from './check.js';
import { runDaemon } from './run.js';
import { runReload, runStatus } from './remote.js';
import { VERSION } from './version.js';

/** sysexits.h EX_CONFIG: systemd's RestartPreventExitStatus=78 stops a restart loop on it. */
export const EX_CONFIG = 78;

const HELP: Record<string, string> = {
  main: `channeld ${VERSION} — a channel daemon: chat platforms in, an agent runtime, live drafts out.

Usage: channeld <command> [options]

Commands:
  run      run the daemon in the foreground (systemd: Type=exec)
  check    validate the config and its secret references; prints "ok" or every error
  status   print the running daemon's channels and turns (from its /status)
  reload   ask the running daemon to re-read its config (SIGHUP via the pid file)

Options:
  -c, --config FILE   config file (default: daemon.config.toml)
  -h, --help          help for a command: channeld <command> --help
  -v, --version       print the version

Exit status: 0 ok, 1 failure, 78 the config is invalid (EX_CONFIG).`,
  run: `Usage: channeld run [--config FILE]

Runs the daemon in the foreground. Logs are JSON on stdout (pretty in a terminal).
Signals: SIGHUP reloads the config (unchanged channels keep their connections);
SIGTERM/SIGINT stop taking messages, let running turns finish up to
daemon.shutdown_grace_ms, then exit 0; a second SIGTERM/SIGINT exits at once with 1.
Exits 78 when the config is invalid.`,
  check: `Usage: channeld check [--config FILE]

Validates the config file, including that every secret reference resolves.
Prints "ok", or one line per problem as file:line:col: key: message, and exits 78.`,
  status: `Usage: channeld status [--config FILE] [--json]

Asks the running daemon (at [http] listen) for /status and prints a table of
channels (state, since, attempts, last error) and turns. --json prints the raw JSON.`,
  reload: `Usage: channeld reload [--config FILE]

Sends SIGHUP to the running daemon, found through the pid file in daemon.state_dir.
An invalid new config is refused by the daemon and the running one stays.`,
};

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      config: { type: 'string', short: 'c', default: 'daemon.config.toml' },
      help: { type: 'boolean', short: 'h' },
      version: { type: 'boolean', short: 'v' },
      json: { type: 'boolean' },
    },
  });
  const command = positionals[0];
  if (values.version) {
    console.log(VERSION);
    return 0;
  }
  if (values.help || !command) {
    console.log(HELP[command ?? 'main'] ?? HELP.main);
    return command || values.help ? 0 : 1;
  }
  switch (command) {
    case 'run':
      return runDaemon(values.config);
    case 'check':
      return runCheck(values.config);
    case 'status':
      return runStatus(values.config, values.json ?? false);
    case 'reload':
      return runReload(values.config);
    default:
      console.error(`channeld: unknown command "${command}"\n\n${HELP.main}`);
      return 1;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    if (err instanceof ConfigError) {
      console.error(err.problems.join('\n'));
      process.exitCode = EX_CONFIG;
    } else if (err instanceof CodedError && err.code === 'CONFIG_NOT_FOUND') {
      console.error(`channeld: ${err.message}`);
      process.exitCode = EX_CONFIG;
    } else {
      console.error(`channeld: ${errorMessage(err)}`);
      process.exitCode = 1;
    }
  },
);
