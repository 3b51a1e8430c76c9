import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openDb } from '../../../src/store/db.js';

// Two processes opening a state file that lacks an added column at once (`channeld upgrade`:
// the new build starts while the old one still runs) must not both add it.

let dir: string;
const handles: Database.Database[] = [];
afterEach(() => {
  for (const h of handles.splice(0)) if (h.open) h.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A state file as an older build left it: no `turns.origin`. */
function olderFile(): string {
  dir = mkdtempSync(join(tmpdir(), 'channeld-addcol-'));
  const file = join(dir, 'channeld.db');
  const db = openDb(file);
  db.exec('ALTER TABLE turns DROP COLUMN origin');
  db.close();
  return file;
}

const columns = (file: string) => {
  const db = new Database(file, { readonly: true });
  handles.push(db);
  return (db.prepare('PRAGMA table_info(turns)').all() as Array<{ name: string }>).map((c) => c.name);
};

describe('a column added in place, by two processes at once', () => {
  it('the other process cannot add it between the look and the add: the start succeeds, and so does the other one', () => {
    const file = olderFile();
    // The other process, at the worst moment: right before this one's ALTER, after its look.
    const rival = new Database(file, { timeout: 0 });
    handles.push(rival);
    const exec = Database.prototype.exec;
    let rivalTried: string | undefined;
    Database.prototype.exec = function (this: Database.Database, sql: string) {
      if (this !== rival && rivalTried === undefined && /ALTER TABLE turns ADD COLUMN origin/.test(sql)) {
        try {
          exec.call(rival, 'ALTER TABLE turns ADD COLUMN origin TEXT');
          rivalTried = 'added it';
        } catch (err) {
          rivalTried = (err as { code?: string }).code ?? String(err);
        }
      }
      return exec.call(this, sql);
    };
    let db: Database.Database;
    try {
      db = openDb(file);
    } finally {
      Database.prototype.exec = exec;
    }
    handles.push(db);
    // The look and the add hold the write lock together: the rival had to wait.
    expect(rivalTried).toBe('SQLITE_BUSY');
    expect(columns(file).filter((c) => c === 'origin')).toHaveLength(1);
    // The rival, trying again (as its busy wait would), finds the column and opens the file.
    const other = openDb(file);
    handles.push(other);
    expect(columns(file).filter((c) => c === 'origin')).toHaveLength(1);
  });
});
