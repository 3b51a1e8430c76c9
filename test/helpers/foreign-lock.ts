import Database from 'better-sqlite3';
import { onTestFinished } from 'vitest';

/**
 * Another process's write lock on a SQLite file: a second connection's `BEGIN IMMEDIATE`, as an
 * operator's tool or a backup would take it. `release` rolls it back and closes the connection;
 * it runs once (later calls do nothing) and at the latest when the test finishes.
 */
export function foreignLock(file: string): { startedMs: number; release(): void } {
  const other = new Database(file);
  other.exec('BEGIN IMMEDIATE');
  let open = true;
  const release = () => {
    if (!open) return;
    open = false;
    other.exec('ROLLBACK');
    other.close();
  };
  onTestFinished(release);
  return { startedMs: Date.now(), release };
}
