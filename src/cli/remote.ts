import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ActionDescriptor } from '../actions/registry.js';
import { loadConfig, type LoadedConfig } from '../config/load.js';
import { parseListen } from '../observe/http.js';

function baseUrl(loaded: LoadedConfig): string {
  const { host, port } = parseListen(loaded.config.http.listen);
  const h = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '[::1]' : host.includes(':') ? `[${host}]` : host;
  return `http://${h}:${port}`;
}

/** SIGHUP through the pid file: how `reload` works when the daemon's HTTP server does not answer. */
function signalReload(loaded: LoadedConfig): number {
  const pidFile = join(loaded.config.daemon.state_dir, 'channeld.pid');
  let pid: number;
  try {
    pid = Number(readFileSync(pidFile, 'utf8').trim());
  } catch {
    console.error(`channeld: no daemon answers over HTTP and there is no pid file at ${pidFile}; is it running with this config?`);
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

/**
 * `channeld <action> [args] [--json]`: finds the action among those the running daemon
 * serves (`GET /actions`), so every registered action has a subcommand, and prints the
 * same data as its HTTP face, rendered by the action (or raw JSON with --json).
 */
export async function runAction(file: string, command: string, args: string[], json: boolean): Promise<number> {
  const loaded = loadConfig(file);
  const base = baseUrl(loaded);
  const token = loaded.secrets.get('http', 'admin_token');
  const auth: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
  let actions: ActionDescriptor[];
  try {
    const res = await fetch(`${base}/actions`, { headers: auth, signal: AbortSignal.timeout(5000) });
    if (!res.ok) {
      console.error(`channeld: the daemon refused: ${((await res.json()) as { error: string }).error}`);
      return 1;
    }
    actions = (await res.json()) as ActionDescriptor[];
  } catch (err) {
    if (command === 'reload') return signalReload(loaded);
    console.error(`channeld: no daemon answers at ${base} (${(err as Error).cause ?? err}); is it running?`);
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
  const input = Object.fromEntries([...action.args, ...(action.optional_args ?? [])].map((k, i) => [k, args[i]]).filter(([, v]) => v !== undefined));
  const accept = json ? 'application/json' : 'text/plain, application/json;q=0.5';
  const res =
    action.method === 'GET'
      ? await fetch(`${base}${action.path}?${new URLSearchParams(input as Record<string, string>)}`, { headers: { ...auth, accept } })
      : await fetch(`${base}${action.path}`, { method: 'POST', headers: { ...auth, accept, 'content-type': 'application/json' }, body: JSON.stringify(input) });
  const text = await res.text();
  if (!res.ok) {
    let message = text;
    try {
      message = (JSON.parse(text) as { error: string }).error;
    } catch {
      /* plain text */
    }
    console.error(`channeld ${action.cli}: ${message}`);
    return 1;
  }
  const isJson = (res.headers.get('content-type') ?? '').includes('json');
  console.log(isJson ? JSON.stringify(JSON.parse(text), null, 2) : text.trimEnd());
  return 0;
}
