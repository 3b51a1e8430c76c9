import { realpathSync } from 'node:fs';
import { isAbsolute, relative, resolve } from 'node:path';

/**
 * The real path of `file` (relative to `dir`) when it stays inside `dir` once every symlink
 * is resolved, else undefined: a link in the workspace pointing at /etc/shadow must not be
 * read as a prompt file. Throws what realpath throws (ENOENT) for a missing file.
 */
export function realPathInside(dir: string, file: string): string | undefined {
  const realDir = realpathSync(resolve(dir));
  const real = realpathSync(resolve(dir, file));
  const rel = relative(realDir, real);
  return rel === '' || rel.startsWith('..') || isAbsolute(rel) ? undefined : real;
}
