#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { CodedError, ConfigError, errorMessage } from '../errors.js';
import { runCheck } from './check.js';
import { runDaemon } from './run.js';
import { builtinActions } from '../actions/builtin/index.js';
import { runAction } from './remote.js';
import { VERSION } from './version.js';

/** sysexits.h EX_CONFIG: systemd's RestartPreventExitStatus=78 stops a restart loop on it. */
export const EX_CONFIG = 78;

const HELP: Record<string, string> = {
  main: `channeld ${VERSION} — a channel daemon: chat platforms in, an agent runtime, live drafts out.

Usage: channeld <command> [options]

Commands:
  run      run the daemon in the foreground (systemd: Type=exec)
  check    validate the config and its secret references; prints "ok" or every error

Management commands (they ask the running daemon over HTTP at [http] listen):
${builtinActions.map((a) => `  ${(a.cli?.name ?? a.name).padEnd(10)}${[...(a.cli?.args ?? []).map((x) => `${x.toUpperCase()} `), ...(a.cli?.optionalArgs ?? []).map((x) => `[${x.toUpperCase()}] `)].join('')}${a.description}`).join('\n')}
  (and any other action the daemon serves; --json prints the raw JSON)

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

Asks the running daemon (at [http] listen) for its status and prints a table of
channels (state, since, attempts, last error), agents and turns. --json prints the JSON.`,
  reload: `Usage: channeld reload [--config FILE]

Asks the running daemon to re-read its config (POST /actions/reload) and prints the
result; when its HTTP server does not answer, sends SIGHUP through the pid file in
daemon.state_dir. An invalid new config is refused and the running one stays.`,
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
    const action = builtinActions.find((a) => (a.cli?.name ?? a.name) === command);
    const actionHelp = action && `Usage: channeld ${command} ${[...(action.cli?.args ?? []).map((x) => `${x.toUpperCase()} `), ...(action.cli?.optionalArgs ?? []).map((x) => `[${x.toUpperCase()}] `)].join('')}[--config FILE] [--json]\n\n${action.description}; asks the running daemon over HTTP.`;
    console.log(HELP[command ?? 'main'] ?? actionHelp ?? HELP.main);
    return command || values.help ? 0 : 1;
  }
  switch (command) {
    case 'run':
      return runDaemon(values.config);
    case 'check':
      return runCheck(values.config);
    default:
      // Every other command is a management action served by the running daemon.
      return runAction(values.config, command, positionals.slice(1), values.json ?? false);
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
