import { readFileSync } from 'node:fs';
import { daemonEndpoint, type DaemonEndpoint } from '../config/reach.js';
import { runFiles } from '../util/run-files.js';

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

/** The pid in `<state_dir>/channeld.pid`, or why there is no running daemon behind it. */
export function daemonPid(stateDir: string): { pid: number } | { problem: string } {
  const file = runFiles(stateDir).pid;
  let pid: number;
  try {
    pid = Number(readFileSync(file, 'utf8').trim());
  } catch {
    return { problem: `there is no pid file at ${file}; is the daemon running with this config?` };
  }
  // After a kill -9 the pid file stays, and its pid may now be any other process.
  const not = notChanneld(pid);
  return not
    ? {
        problem: `not signalling pid ${pid} from ${file}: ${not}. The pid file is stale; the daemon is not running with this config (remove the file, then start it)`,
      }
    : { pid };
}

export interface CliReach {
  config: string;
  env: NodeJS.ProcessEnv;
  /** `--url`, else `$CHANNELD_URL`. */
  url: string | undefined;
  tokenFile: string | undefined;
}

/**
 * How a management command reaches the daemon: `--url` / `$CHANNELD_URL` when given; else the
 * address the running daemon recorded in its state_dir (the one it really bound, even after
 * `[http] listen` was edited in the file); else `[http] listen` from the file.
 */
export function findDaemon(reach: CliReach): DaemonEndpoint {
  const endpoint = daemonEndpoint(reach.config, reach.env, reach.url, reach.tokenFile);
  if (reach.url) return endpoint;
  const running = daemonPid(endpoint.stateDir);
  if (!('pid' in running)) return endpoint;
  try {
    const recorded = readFileSync(runFiles(endpoint.stateDir).url, 'utf8').trim();
    if (recorded) return { ...endpoint, baseUrl: recorded };
  } catch {
    // A daemon of an earlier build records no address: [http] listen it is.
  }
  return endpoint;
}
