import { accessSync, chmodSync, constants, mkdirSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { CodedError } from '../contracts/errors.js';

/** The conversation history is private to the daemon's user, whoever starts it. */
export const STATE_DIR_MODE = 0o700;
export const STATE_FILE_MODE = 0o600;

function unusable(dir: string, why: string, cause?: unknown): CodedError {
  return new CodedError('STATE_DIR_UNUSABLE', `state_dir "${dir}" ${why}`, { cause });
}

/** What is wrong with `dir` as a state_dir without creating anything, or undefined (`channeld check`). */
export function stateDirProblem(dir: string): string | undefined {
  let path = resolve(dir);
  for (;;) {
    try {
      const st = statSync(path);
      if (!st.isDirectory()) return path === resolve(dir) ? 'is a file, not a directory' : `cannot be created: ${path} is a file, not a directory`;
      return undefined;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT' && code !== 'ENOTDIR') return `cannot be used: ${code}`;
    }
    const up = dirname(path);
    if (up === path) return undefined;
    path = up;
  }
}

/**
 * Creates `dir` (mode 0700) one level at a time, or checks an existing one is a writable
 * directory. Node's recursive mkdirSync never returns under /proc (e.g. "/proc/nope"), so
 * the walk is ours: it ends after as many steps as the path has parts.
 */
export function prepareStateDir(dir: string): void {
  const target = resolve(dir);
  const missing: string[] = [];
  let path = target;
  for (;;) {
    try {
      if (!statSync(path).isDirectory())
        throw unusable(dir, path === target ? 'is a file, not a directory' : `cannot be created: ${path} is a file, not a directory`);
      break;
    } catch (err) {
      if (err instanceof CodedError) throw err;
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT' && code !== 'ENOTDIR') throw unusable(dir, `cannot be used: ${code}`, err);
    }
    missing.unshift(path);
    const up = dirname(path);
    if (up === path) break;
    path = up;
  }
  for (const p of missing) {
    try {
      mkdirSync(p, { mode: STATE_DIR_MODE });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'EEXIST') throw unusable(dir, `cannot be created: mkdir ${p}: ${code}`, err);
    }
  }
  try {
    // An existing directory (e.g. systemd's StateDirectory, 0755 by default) is narrowed too.
    if ((statSync(target).mode & 0o077) !== 0) chmodSync(target, STATE_DIR_MODE);
  } catch {
    /* not ours to change: the access check below says whether we can work in it */
  }
  try {
    accessSync(target, constants.W_OK | constants.X_OK);
  } catch (err) {
    throw unusable(dir, `is not writable: ${(err as NodeJS.ErrnoException).code}`, err);
  }
}
