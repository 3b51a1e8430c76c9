import Database from 'better-sqlite3';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { daemonEndpoint } from '../config/reach.js';

/**
 * `channeld backup FILE`: a consistent copy of the state database through SQLite's online
 * backup API, safe while the daemon writes (pages changed during the copy are copied
 * again). Reads only `[daemon] state_dir` from the config, leniently, like the management
 * commands: no secrets are needed.
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
  if (existsSync(target)) {
    console.error(`channeld backup: ${target} exists; give a new file name`);
    return 1;
  }
  const source = new Database(db, { readonly: true, fileMustExist: true });
  try {
    const { totalPages } = await source.backup(target);
    console.log(`backed up ${db} to ${resolve(target)} (${totalPages} pages)`);
    return 0;
  } finally {
    source.close();
  }
}
