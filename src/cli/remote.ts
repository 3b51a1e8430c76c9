import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig } from '../config/load.js';
import { parseListen } from '../observe/http.js';
import type { DaemonStatus } from '../observe/routes.js';

function baseUrl(file: string): string {
  const { host, port } = parseListen(loadConfig(file).config.http.listen);
  const h = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '[::1]' : host.includes(':') ? `[${host}]` : host;
  return `http://${h}:${port}`;
}

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows.map((r) => r.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd()).join('\n');
}

/** Renders /status as the table `channeld status` prints. */
export function formatStatus(s: DaemonStatus): string {
  const head = `channeld ${s.version}  pid ${s.pid}  up ${s.uptime_s}s  generation ${s.generation}  ${s.ready ? 'ready' : 'not ready'}`;
  const rows = [['CHANNEL', 'KIND', 'STATE', 'SINCE', 'ATTEMPTS', 'CONN', 'IN FLIGHT', 'QUEUED', 'LAST ERROR']];
  for (const c of s.channels) {
    const err = c.last_error as { code: string; message: string } | null;
    rows.push([c.id, String(c.kind), c.state, String(c.since), String(c.attempts), String(c.connection), String(c.in_flight), String(c.queued), err ? `${err.code}: ${err.message}` : '-']);
  }
  const reload = s.last_reload ? `last reload ${s.last_reload.at}: ${s.last_reload.ok ? 'applied' : `refused (${s.last_reload.errors.join('; ')})`}` : 'no reload yet';
  return `${head}\n\n${table(rows)}\n\nturns: ${s.turns.in_flight} running, ${s.turns.queued} queued; ${reload}`;
}

export async function runStatus(file: string, json: boolean): Promise<number> {
  const url = `${baseUrl(file)}/status`;
  let res: Response;
  try {
    res = await fetch(url, { signal: AbortSignal.timeout(5000) });
  } catch (err) {
    console.error(`channeld: no daemon answers at ${url} (${(err as Error).cause ?? err}); is it running?`);
    return 1;
  }
  const body = (await res.json()) as DaemonStatus;
  console.log(json ? JSON.stringify(body, null, 2) : formatStatus(body));
  return 0;
}

export async function runReload(file: string): Promise<number> {
  const { config } = loadConfig(file);
  const pidFile = join(config.daemon.state_dir, 'channeld.pid');
  let pid: number;
  try {
    pid = Number(readFileSync(pidFile, 'utf8').trim());
  } catch {
    console.error(`channeld: no pid file at ${pidFile}; is the daemon running with this config?`);
    return 1;
  }
  try {
    process.kill(pid, 'SIGHUP');
  } catch (err) {
    console.error(`channeld: cannot signal pid ${pid}: ${(err as NodeJS.ErrnoException).code}; remove the stale ${pidFile} if the daemon is gone`);
    return 1;
  }
  console.log(`sent SIGHUP to ${pid}; see /status last_reload for the result`);
  return 0;
}
