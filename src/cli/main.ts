import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { ChannelDescriptor } from '../contracts/channel.js';
import { ChannelKinds } from '../config/kinds.js';
import { exitCodeFor, reportStartFailure } from './exit.js';
import { runCheck } from './check.js';
import { runDaemon } from './run.js';
import { builtinActions } from '../actions/builtin/index.js';
import { runAction } from './remote.js';
import { runBackup } from './backup.js';
import { findDaemon } from './endpoint.js';
import { VERSION } from '../util/version.js';

const OPTIONS = `Options:
  -c, --config FILE   config file (default: $CHANNELD_CONFIG, else daemon.config.toml)
      --url URL       the daemon's base URL for management commands (default: $CHANNELD_URL,
                      else the address the running daemon recorded in its state_dir, else
                      http://<[http] listen>); host:port means http://host:port
      --token-file F  read the admin token from file F (default: $CHANNELD_ADMIN_TOKEN, else
                      the variable [http] admin_token_env names); no config file needed
      --json          print the daemon's JSON instead of a table
  -h, --help          help for a command: channeld <command> --help
  -v, --version       print the version`;

const REACH = `It reaches the daemon the way it was started: the pid file and the address the daemon
recorded in daemon.state_dir (relative to the config file), else [http] listen; --url /
CHANNELD_URL override both. The admin token comes from --token-file, $CHANNELD_ADMIN_TOKEN
or the variable [http] admin_token_env names; none of them needs a config file. It never
resolves channel secrets and works while the file has errors.`;

/** `channeld --help`: the commands, and the channel kinds this build runs. */
function mainHelp(kinds: ChannelKinds): string {
  return `channeld ${VERSION} — a channel daemon: chat platforms in, an agent runtime, live drafts out.

Usage: channeld <command> [options]

Commands:
  run           run the daemon in the foreground (systemd: Type=notify)
  check         validate the config and its secret references; prints "ok" or every error
  backup FILE   copy the state database to FILE while the daemon runs (SQLite online backup)

Management commands (they ask the running daemon over HTTP, where it recorded it listens):
${builtinActions.map((a) => `  ${[a.cli?.name ?? a.name, ...(a.cli?.args ?? []).map((x) => x.toUpperCase()), ...(a.cli?.optionalArgs ?? []).map((x) => `[${x.toUpperCase()}]`)].join(' ').padEnd(14)}${a.description}`).join('\n')}
  (and any other action the daemon serves)

Channel kinds ([[channels]] type):
${kinds.all.map((k) => `  ${k.kind.padEnd(14)}${k.summary}`).join('\n')}

${OPTIONS}

Exit status: 0 ok, 1 failure, 78 (EX_CONFIG) something the operator must fix: an invalid
config or one the daemon refused, a listen address that cannot be bound, an unusable
state_dir, a database from a newer channeld or one that failed its integrity check.`;
}

const HELP: Record<string, string> = {
  run: `Usage: channeld run [--config FILE]

Runs the daemon in the foreground. Logs are JSON on stdout (pretty in a terminal).
Signals: SIGHUP reloads the config (unchanged channels keep their connections);
SIGTERM/SIGINT stop taking messages, let running turns finish up to
daemon.shutdown_grace_ms, then exit 0; a second SIGTERM/SIGINT exits at once with 1;
SIGUSR2 upgrades to the new build as \`channeld upgrade\` does.
Any start failure stops the HTTP server and exits: 78 when the operator must fix
something (invalid config, unbindable [http] listen, unusable state_dir, a database that
is newer or damaged, a wrong CHANNELD_V8_FLAGS), 1 otherwise.
CHANNELD_V8_FLAGS (the systemd unit and npm start set "--heap-growing-percent=10
--expose-gc") holds the V8 flags channeld sets itself, the growth limit once it is ready:
on node's command line they would make Node compile its built-in modules from source.`,
  check: `Usage: channeld check [--config FILE] [--against-daemon]

Validates the config file: its contents, the rules across keys, and that every secret
reference resolves, all in one run. Prints "ok" (and a warning when no channel is
enabled), or one line per problem as file:line:col: key: message, and exits 78.
Secrets are resolved in this shell's environment, which is not the daemon's (systemd's
Environment=, LoadCredential=): the output says which one was checked.

--against-daemon asks the running daemon to validate its config file in its own
environment without applying it (the reload action's dry run), including the refusals a
reload gives (a changed [http] listen, [daemon] state_dir or [daemon] plugins needs a
restart; no enabled channel); exits 78 when the daemon would refuse it. The daemon does
not import plugin folders for it: a plain check does.`,
  status: `Usage: channeld status [--config FILE] [--url URL] [--token-file FILE] [--json]

Asks the running daemon for its status and prints a table of channels (state, since,
connect attempts, connections made, last error), agents and turns, and the last reload.
--json prints the JSON. ${REACH}`,
  reload: `Usage: channeld reload [--config FILE] [--url URL] [--token-file FILE]

Asks the running daemon to re-read its config (POST /actions/reload) and prints the
result; when its HTTP server does not answer, sends SIGHUP through the pid file in
daemon.state_dir and waits for the outcome the daemon records there. An invalid new config,
or one that changes a key needing a restart, is refused, the running one stays, and the
exit status is 78 on either path, so \`channeld reload && echo deployed\` is honest (the
systemd unit's ExecReload runs this command).

${REACH}`,
  upgrade: `Usage: channeld upgrade [--exec PATH] [--config FILE] [--url URL] [--token-file FILE] [--json]

Asks the running daemon (POST /actions/upgrade; SIGUSR2 does the same) to start the new
build (its own command line resolved anew: dist/bundle points at the newest build) or
--exec PATH (a .js file runs under the same node, anything else is executed; with the
daemon's arguments), hand it the HTTP listening socket (the port never closes) and each
listener in its platform's way (polling from the stored offset, a resumed gateway session,
a second socket before the first closes), wait until it is
ready and hand over; the old process finishes its running turns and exits 0. If the new
one fails or is not ready within daemon.upgrade_timeout_ms it is stopped, the old one
carries on, and the exit status is 78 with its reason. ${REACH}`,
  backup: `Usage: channeld backup FILE [--config FILE]

Copies the state database (daemon.state_dir/channeld.db) to FILE with SQLite's online
backup API: safe while the daemon runs, the copy is consistent. Restore by stopping the
daemon and copying FILE to daemon.state_dir/channeld.db (remove channeld.db-wal and
channeld.db-shm first).`,
};

function actionHelp(command: string): string | undefined {
  const action = builtinActions.find((a) => (a.cli?.name ?? a.name) === command);
  if (!action) return undefined;
  const args = [...(action.cli?.args ?? []).map((x) => `${x.toUpperCase()} `), ...(action.cli?.optionalArgs ?? []).map((x) => `[${x.toUpperCase()}] `)].join(
    '',
  );
  return `Usage: channeld ${command} ${args}[--config FILE] [--url URL] [--token-file FILE] [--json]\n\n${action.description[0]!.toUpperCase()}${action.description.slice(1)}; asks the running daemon over HTTP.\n${REACH}`;
}

/** The config file: --config, else $CHANNELD_CONFIG (the systemd unit sets it), else ./daemon.config.toml. */
export function configPath(flag: string | undefined, env: NodeJS.ProcessEnv): string {
  return flag ?? (env.CHANNELD_CONFIG || 'daemon.config.toml');
}

async function main(argv: string[], descriptors: readonly ChannelDescriptor[]): Promise<number> {
  const kinds = new ChannelKinds(descriptors);
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      config: { type: 'string', short: 'c' },
      url: { type: 'string' },
      'token-file': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
      version: { type: 'boolean', short: 'v' },
      json: { type: 'boolean' },
      'against-daemon': { type: 'boolean' },
      exec: { type: 'string' },
    },
  });
  const command = positionals[0];
  if (values.version) {
    console.log(VERSION);
    return 0;
  }
  if (values.help || !command) {
    console.log((command && (HELP[command] ?? actionHelp(command))) || mainHelp(kinds));
    return command || values.help ? 0 : 1;
  }
  const config = configPath(values.config, process.env);
  const endpoint = () => findDaemon({ config, env: process.env, url: values.url ?? (process.env.CHANNELD_URL || undefined), tokenFile: values['token-file'] });
  switch (command) {
    case 'run':
      return runDaemon(config, kinds);
    case 'check':
      return values['against-daemon'] ? runAction(endpoint(), 'reload', [], { json: values.json ?? false, input: { dry_run: true } }) : runCheck(config, kinds);
    case 'backup':
      return runBackup(config, positionals[1]);
    case 'upgrade':
      return runAction(endpoint(), 'upgrade', [], { json: values.json ?? false, input: values.exec ? { exec: resolve(values.exec) } : {} });
    default:
      // Every other command is a management action served by the running daemon.
      return runAction(endpoint(), command, positionals.slice(1), { json: values.json ?? false });
  }
}

/**
 * The CLI with the channel kinds this build runs: the entry point (bin/channeld.ts) imports
 * the registry and calls this, so nothing in `src/` imports `channels/`. Sets the exit code.
 */
export function runCli(argv: string[], kinds: readonly ChannelDescriptor[]): Promise<void> {
  return main(argv, kinds).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      reportStartFailure(err);
      process.exitCode = exitCodeFor(err);
    },
  );
}
