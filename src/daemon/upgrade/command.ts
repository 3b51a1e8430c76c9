import { isAbsolute } from 'node:path';
import { CodedError } from '../../contracts/errors.js';

/**
 * What the old process starts: its own command line resolved anew (node runs the entry by
 * the path it was given, `dist/bundle/channeld.js`, whose symlink `npm run build` moved to
 * the new build), or `exec`: a `.js` file run by the same node with the same flags, any
 * other file executed directly; either way with the daemon's own arguments (`run --config ...`).
 */
export function successorCommand(exec?: string, proc: Pick<NodeJS.Process, 'execPath' | 'execArgv' | 'argv'> = process): { file: string; args: string[] } {
  const args = proc.argv.slice(2);
  if (exec === undefined) return { file: proc.execPath, args: [...proc.execArgv, proc.argv[1]!, ...args] };
  if (!isAbsolute(exec) || exec.length > 4096) throw new CodedError('UPGRADE_FAILED', `--exec must be an absolute path (got "${exec.slice(0, 200)}")`);
  if (/\.[cm]?js$/.test(exec)) return { file: proc.execPath, args: [...proc.execArgv, exec, ...args] };
  return { file: exec, args };
}
