import { readFileSync } from 'node:fs';
import { parse } from 'smol-toml';
import { parseListen } from '../util/http-helpers.js';
import { localUrl, stateDirOf } from '../util/run-files.js';

/**
 * How the management CLI reaches the running daemon: its base URL, the admin token and
 * where the pid file lives. Read leniently, on purpose: the CLI must work from a shell
 * without the bot's secrets and while the file on disk has an error (that is exactly when
 * an operator asks `channeld status` for `last_reload`). Only `[http] listen`,
 * `[http] admin_token_env` and `[daemon] state_dir` are read; no channel secret is ever
 * resolved and no other key is validated. The admin token may come without any config
 * (`--token-file`, `$CHANNELD_ADMIN_TOKEN`).
 */
export interface DaemonEndpoint {
  baseUrl: string;
  /** The admin token: `--token-file`, else `$CHANNELD_ADMIN_TOKEN`, else the variable `admin_token_env` names. */
  token: string | undefined;
  /** Where the token came from, for messages when the daemon refuses it. */
  tokenFrom: string | undefined;
  /** The variable `[http] admin_token_env` names, for messages when it is unset. */
  tokenEnv: string | undefined;
  stateDir: string;
  /** Why a value fell back to its default (the file is missing or a key is unreadable). */
  notes: string[];
}

interface Keys {
  listen?: unknown;
  admin_token_env?: unknown;
  state_dir?: unknown;
}

/** The three keys from well-formed TOML. */
function fromToml(source: string): Keys {
  const raw = parse(source) as { http?: Record<string, unknown>; daemon?: Record<string, unknown> };
  return { listen: raw.http?.listen, admin_token_env: raw.http?.admin_token_env, state_dir: raw.daemon?.state_dir };
}

/** The three keys line by line, for a file that does not parse: `key = "value"` under its table header. */
function fromLines(source: string): Keys {
  const keys: Record<string, string> = {};
  let table = '';
  for (const raw of source.split(/\r?\n/)) {
    const line = raw.trim();
    const header = /^\[\s*([A-Za-z0-9_.\-[\] ]+?)\s*\]$/.exec(line);
    if (header) {
      table = header[1]!.replace(/[[\]\s]/g, '');
      continue;
    }
    const kv = /^([A-Za-z0-9_]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|'([^']*)')\s*(?:#.*)?$/.exec(line);
    if (!kv) continue;
    const wanted = (table === 'http' && (kv[1] === 'listen' || kv[1] === 'admin_token_env')) || (table === 'daemon' && kv[1] === 'state_dir');
    if (wanted && !(kv[1]! in keys)) keys[kv[1]!] = kv[2] ?? kv[3] ?? '';
  }
  return keys;
}

function urlOf(listen: string): string {
  const { host, port } = parseListen(listen);
  return localUrl(host, port);
}

/** `--url` / `CHANNELD_URL` as given: a bare `host:port` means http. */
export function normalizeUrl(url: string): string {
  const full = /^[a-z][a-z0-9+.-]*:\/\//i.test(url) ? url : `http://${url}`;
  try {
    new URL(full);
  } catch {
    throw new Error(`--url / CHANNELD_URL "${url}" is not a URL: write http://host:port or host:port`);
  }
  return full.replace(/\/+$/, '');
}

/** The admin token from `--token-file` or `$CHANNELD_ADMIN_TOKEN`, which need no config file. */
function givenToken(env: NodeJS.ProcessEnv, tokenFile: string | undefined): { token: string; from: string } | undefined {
  if (tokenFile) {
    let text: string;
    try {
      text = readFileSync(tokenFile, 'utf8').trim();
    } catch (err) {
      throw new Error(`--token-file ${tokenFile} cannot be read (${(err as NodeJS.ErrnoException).code ?? err})`);
    }
    if (!text) throw new Error(`--token-file ${tokenFile} is empty`);
    return { token: text, from: `--token-file ${tokenFile}` };
  }
  if (env.CHANNELD_ADMIN_TOKEN) return { token: env.CHANNELD_ADMIN_TOKEN, from: '$CHANNELD_ADMIN_TOKEN' };
  return undefined;
}

/**
 * Finds the daemon for a management command. `url` (from `--url` or `CHANNELD_URL`) wins
 * over `[http] listen`; the file may be missing or broken.
 */
export function daemonEndpoint(file: string, env: NodeJS.ProcessEnv, url?: string, tokenFile?: string): DaemonEndpoint {
  const notes: string[] = [];
  let keys: Keys = {};
  let source: string | undefined;
  try {
    source = readFileSync(file, 'utf8');
  } catch (err) {
    if (!url) notes.push(`cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? err}); using the default listen address`);
  }
  if (source !== undefined) {
    try {
      keys = fromToml(source);
    } catch {
      keys = fromLines(source);
    }
  }
  const str = (v: unknown) => (typeof v === 'string' && v.length > 0 ? v : undefined);
  let listen = str(keys.listen) ?? '127.0.0.1:8787';
  if (!/^(\[[0-9a-fA-F:.]+\]|[^:\s]+):\d{1,5}$/.test(listen)) {
    notes.push(`[http] listen = ${JSON.stringify(listen)} is not "host:port"; using 127.0.0.1:8787`);
    listen = '127.0.0.1:8787';
  }
  const tokenEnv = str(keys.admin_token_env);
  const given = givenToken(env, tokenFile);
  const fromConfig = tokenEnv ? str(env[tokenEnv]) : undefined;
  return {
    baseUrl: url ? normalizeUrl(url) : urlOf(listen),
    token: given?.token ?? fromConfig,
    tokenFrom: given?.from ?? (fromConfig ? `$${tokenEnv}` : undefined),
    tokenEnv,
    stateDir: stateDirOf(file, str(keys.state_dir) ?? './.channeld'),
    notes,
  };
}
