import { dirname, join, resolve } from 'node:path';

/**
 * The files a running daemon keeps in its state_dir so the CLI reaches it the way it was
 * started, not the way the config file on disk reads now (an edited `[http] listen` must not
 * send `channeld reload` elsewhere): its pid, the base URL its HTTP server really bound, and
 * the outcome of the last reload asked for by SIGHUP (which has no reply channel of its own).
 * All are written 0600 and removed when the daemon stops.
 */
export function runFiles(stateDir: string): { pid: string; url: string; reload: string } {
  return { pid: join(stateDir, 'channeld.pid'), url: join(stateDir, 'channeld.url'), reload: join(stateDir, 'channeld.reload.json') };
}

/** What `channeld.reload.json` holds after a SIGHUP reload: `id` changes with every reload. */
export interface ReloadOutcome {
  id: string;
  ok: boolean;
  generation: number;
  errors: string[];
}

/** The URL a client on this machine uses for a bound (or configured) host and port: a wildcard is reached on loopback. */
export function localUrl(host: string, port: number): string {
  const h = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '[::1]' : host.includes(':') ? `[${host}]` : host;
  return `http://${h}:${port}`;
}

/** A relative `state_dir` is relative to the config file's folder, as the daemon reads it. */
export function stateDirOf(file: string, stateDir: string): string {
  return resolve(dirname(resolve(file)), stateDir);
}
