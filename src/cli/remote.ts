import { readFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import type { ActionDescriptor } from '../actions/registry.js';
import { EXIT_STATUS_HEADER } from '../actions/registry.js';
import type { DaemonEndpoint } from '../config/reach.js';
import { runFiles, type ReloadOutcome } from '../util/run-files.js';
import { daemonPid } from './endpoint.js';
import { EX_CONFIG } from './exit.js';

/** How long `channeld reload` waits for the outcome of a SIGHUP reload: starting channels may take a while. */
const SIGNAL_RELOAD_WAIT_MS = 120_000;

function readOutcome(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

/**
 * SIGHUP through the pid file: how `reload` works when the daemon's HTTP server does not
 * answer. Waits for the outcome the daemon writes to `channeld.reload.json`, so a refused
 * reload exits 78 here as over HTTP.
 */
async function signalReload(endpoint: DaemonEndpoint, signal: AbortSignal = AbortSignal.timeout(SIGNAL_RELOAD_WAIT_MS)): Promise<number> {
  const running = daemonPid(endpoint.stateDir);
  if (!('pid' in running)) {
    console.error(`channeld: no daemon answers over HTTP at ${endpoint.baseUrl}; ${running.problem}`);
    return 1;
  }
  const file = runFiles(endpoint.stateDir).reload;
  const before = readOutcome(file);
  try {
    process.kill(running.pid, 'SIGHUP');
  } catch (err) {
    console.error(`channeld: cannot signal pid ${running.pid}: ${(err as NodeJS.ErrnoException).code}; remove the stale pid file if the daemon is gone`);
    return 1;
  }
  console.error(`channeld: no daemon answers over HTTP at ${endpoint.baseUrl}; sent SIGHUP to ${running.pid}, waiting for the outcome`);
  for (;;) {
    const now = readOutcome(file);
    if (now !== undefined && now !== before) {
      let outcome: ReloadOutcome;
      try {
        outcome = JSON.parse(now) as ReloadOutcome;
      } catch {
        // Not JSON (the daemon writes it whole, by rename, so something else wrote it): wait for the next.
        if (signal.aborted) break;
        await delay(50, undefined, { signal }).catch(() => {});
        continue;
      }
      if (outcome.ok) {
        console.log(`reloaded: generation ${outcome.generation}`);
        return 0;
      }
      console.log(`refused, the running config stays:\n${outcome.errors.join('\n')}`);
      return EX_CONFIG;
    }
    if (signal.aborted) break;
    if (!('pid' in daemonPid(endpoint.stateDir))) {
      console.error(`channeld: the daemon (pid ${running.pid}) exited before it reported the reload`);
      return 1;
    }
    await delay(50, undefined, { signal }).catch(() => {});
  }
  console.error(`channeld: sent SIGHUP to ${running.pid} but it reported no outcome within ${SIGNAL_RELOAD_WAIT_MS / 1000} s; see \`channeld status\``);
  return 1;
}

async function errorOf(res: Response): Promise<string> {
  const text = await res.text();
  try {
    return (JSON.parse(text) as { error: string }).error;
  } catch {
    return text;
  }
}

/** What to tell the operator when the daemon refuses the CLI's credentials. */
function refusal(endpoint: DaemonEndpoint, status: number, message: string): string {
  if (status !== 401) return message;
  if (endpoint.token) return `${message}: ${endpoint.tokenFrom} is not the daemon's admin token`;
  return endpoint.tokenEnv
    ? `${message}: export ${endpoint.tokenEnv} (named by [http] admin_token_env) or CHANNELD_ADMIN_TOKEN in this shell, or pass --token-file FILE`
    : `${message}: the daemon has an admin token; export CHANNELD_ADMIN_TOKEN or pass --token-file FILE`;
}

export interface CallOptions {
  json: boolean;
  /** Extra input for the action beyond the positional arguments. */
  input?: Record<string, unknown>;
  /** Ends the wait for a SIGHUP reload's outcome (default: two minutes). */
  signal?: AbortSignal;
}

/**
 * `channeld <action> [args] [--json]`: finds the action among those the running daemon
 * serves (`GET /actions`), so every registered action has a subcommand, and prints the
 * same data as its HTTP face, rendered by the action (or raw JSON with --json). The exit
 * status is the one the action gives its result (a refused reload is 78), else 0.
 */
export async function runAction(endpoint: DaemonEndpoint, command: string, args: string[], options: CallOptions): Promise<number> {
  const base = endpoint.baseUrl;
  const auth: Record<string, string> = endpoint.token ? { authorization: `Bearer ${endpoint.token}` } : {};
  let actions: ActionDescriptor[];
  try {
    const res = await fetch(`${base}/actions`, { headers: auth, signal: AbortSignal.timeout(5000) });
    if (!res.ok) {
      console.error(`channeld: the daemon at ${base} refused: ${refusal(endpoint, res.status, await errorOf(res))}`);
      return 1;
    }
    actions = (await res.json()) as ActionDescriptor[];
  } catch (err) {
    for (const n of endpoint.notes) console.error(`channeld: ${n}`);
    if (command === 'reload' && !options.input?.dry_run) return signalReload(endpoint, options.signal);
    console.error(`channeld: no daemon answers at ${base} (${(err as Error).cause ?? err}); is it running? (--url or CHANNELD_URL point elsewhere)`);
    return 1;
  }
  const action = actions.find((a) => a.cli === command);
  if (!action) {
    console.error(`channeld: unknown command "${command}". The daemon serves: ${actions.map((a) => a.cli).join(', ')}`);
    return 1;
  }
  if (args.length < action.args.length) {
    console.error(`Usage: channeld ${action.cli} ${action.args.map((a) => a.toUpperCase()).join(' ')}\n\n${action.description}`);
    return 1;
  }
  const input = {
    ...Object.fromEntries([...action.args, ...(action.optional_args ?? [])].map((k, i) => [k, args[i]]).filter(([, v]) => v !== undefined)),
    ...options.input,
  };
  const accept = options.json ? 'application/json' : 'text/plain, application/json;q=0.5';
  const res =
    action.method === 'GET'
      ? await fetch(`${base}${action.path}?${new URLSearchParams(input as Record<string, string>)}`, { headers: { ...auth, accept } })
      : await fetch(`${base}${action.path}`, { method: 'POST', headers: { ...auth, accept, 'content-type': 'application/json' }, body: JSON.stringify(input) });
  if (!res.ok) {
    console.error(`channeld ${action.cli}: ${refusal(endpoint, res.status, await errorOf(res))}`);
    return 1;
  }
  const text = await res.text();
  const isJson = (res.headers.get('content-type') ?? '').includes('json');
  console.log(isJson ? JSON.stringify(JSON.parse(text), null, 2) : text.trimEnd());
  return Number(res.headers.get(EXIT_STATUS_HEADER) ?? 0) || 0;
}
