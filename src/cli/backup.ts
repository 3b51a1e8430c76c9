import Database from 'better-sqlite3';
import { closeSync, existsSync, openSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { daemonEndpoint } from '../config/reach.js';

/**
 * `channeld backup FILE`: a consistent copy of the state database through SQLite's online
 * backup API, safe while the daemon writes (pages changed during the copy are copied
 * again). Reads only `[daemon] state_dir` from the config (relative to the config file's
 * folder, as the daemon reads it), leniently, like the management commands: no secrets are
 * needed. The copy is 0600, like the database: it holds the conversation history.
 */
export async function runBackup(configFile: string, target: string | undefined): Promise<number> {
  if (!target) {
    console.error('Usage: channeld backup FILE [--config FILE]');
    return 1;
  }
  const db = join(daemonEndpoint(configFile, {}).stateDir, 'channeld.db');
  if (!existsSync(db)) {
    console.error(`channeld backup: there is no database at ${db} (daemon.state_dir of ${configFile})`);
    return 1;
  }
  // Created here, exclusively and 0600 whatever the umask, before SQLite writes into it.
  try {
    closeSync(openSync(target, 'wx', 0o600));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    console.error(code === 'EEXIST' ? `channeld backup: ${target} exists; give a new file name` : `channeld backup: cannot create ${target} (${code ?? err})`);
    return 1;
  }
  const source = new Database(db, { readonly: true, fileMustExist: true });
  try {
    const { totalPages } = await source.backup(target);
    console.log(`backed up ${db} to ${resolve(target)} (${totalPages} pages)`);
    return 0;
  } catch (err) {
    rmSync(target, { force: true });
    throw err;
  } finally {
    source.close();
  }
}
