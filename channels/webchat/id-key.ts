import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { dirname } from 'node:path';

/** A random key kept in `file` (0600), made on first use; in memory only where the file cannot be written. */
export function storedKey(file: string): string {
  try {
    const kept = readFileSync(file, 'utf8').trim();
    if (kept) return kept;
  } catch {
    // Not made yet.
  }
  const key = randomBytes(32).toString('hex');
  try {
    mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
    writeFileSync(file, key, { mode: 0o600 });
  } catch {
    // A read-only state dir: ids then change on restart, which only costs a pending approval its starter.
  }
  return key;
}
