import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ActionDescriptor } from '../actions/registry.js';
import { EXIT_STATUS_HEADER } from '../actions/registry.js';
import type { DaemonEndpoint } from '../config/reach.js';

/** Why `pid` is not a running channeld daemon, or undefined when it is. */
export function notChanneld(pid: number): string | undefined {
  if (!Number.isInteger(pid) || pid <= 0) return 'the pid file holds no pid';
  let argv: string[];
  try {
    argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'ENOENT' ? 'no such process' : `its command line cannot be read (${code}), so it cannot be told apart from another program`;
  }
  const script = argv.findIndex((a) => /(^|\/)channeld(\.[jt]s)?$|(^|\/)cli\/main\.[jt]s$/.test(a));
  if (script >= 0 && argv.slice(script + 1).includes('run')) return undefined;
  return `it is "${argv.join(' ').slice(0, 200)}", not channeld`;
}

/** SIGHUP through the pid file: how `reload` works when the daemon's HTTP server does not answer. */
function signalReload(endpoint: DaemonEndpoint): number {
  const pidFile = join(endpoint.stateDir, 'channeld.pid');
  let pid: number;
  try {
    pid = Number(readFileSync(pidFile, 'utf8').trim());
  } catch {
    console.error(`channeld: no daemon answers over HTTP and there is no pid file at ${pidFile}; is it running with this config?`);
    return 1;
  }
  // After a kill -9 the pid file stays, and its pid may now be any other process: signal
  // only a process whose command line is `channeld run` (or channeld.js run; cli/main.js run is the entry of earlier builds).
  const not = notChanneld(pid);
  if (not) {
    console.error(
      `channeld: not signalling pid ${pid} from ${pidFile}: ${not}. The pid file is stale; the daemon is not running with this config (remove the file, then start it).`,
    );
    return 1;
  }
  try {
    process.kill(pid, 'SIGHUP');
  } catch (err) {
    console.error(`channeld: cannot signal pid ${pid}: ${(err as NodeJS.ErrnoException).code}; remove the stale ${pidFile} if the daemon is gone`);
    return 1;
  }
  console.log(`sent SIGHUP to ${pid}; see \`channeld status\` for the result`);
  return 0;
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
  if (!endpoint.tokenEnv)
    return `${message}: the daemon has an admin token; set [http] admin_token_env in this config (or run from the daemon's config) and export that variable`;
  return endpoint.token
    ? `${message}: $${endpoint.tokenEnv} in this shell is not the daemon's admin token`
    : `${message}: export ${endpoint.tokenEnv} (named by [http] admin_token_env) in this shell`;
}

export interface CallOptions {
  json: boolean;
  /** Extra input for the action beyond the positional arguments. */
  input?: Record<string, unknown>;
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
    if (command === 'reload' && !options.input?.dry_run) return signalReload(endpoint);
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
