import Database from 'better-sqlite3';
import { mkdtempSync, openSync, rmSync, statSync, writeFileSync, writeSync, closeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CodedError } from '../../../src/contracts/errors.js';
import { openDb, PAGE_CACHE_KIB, SCHEMA_VERSION } from '../../../src/store/db.js';
import { GroupCommit } from '../../../src/store/group-commit.js';
import { StorageHealth } from '../../../src/store/health.js';
import { prepareStateDir, stateDirProblem } from '../../../src/util/state-dir.js';
import { waitFor } from '../../helpers/daemon.js';

const dirs: string[] = [];
function tmp(): string {
  const d = mkdtempSync(join(tmpdir(), 'channeld-db-'));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function codeOf(fn: () => unknown): { code: string; message: string } {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(CodedError);
    return err as CodedError;
  }
  throw new Error('did not throw');
}

describe('opening the state database', () => {
  it("bounds SQLite's page cache (better-sqlite3 builds it with 16 MB, resident for good once the database grows)", () => {
    const db = openDb(join(tmp(), 'channeld.db'));
    try {
      expect(db.pragma('cache_size', { simple: true })).toBe(-PAGE_CACHE_KIB);
      expect(PAGE_CACHE_KIB).toBeLessThanOrEqual(4000);
    } finally {
      db.close();
    }
  });

  it('creates state_dir 0700 and channeld.db (and its WAL files) 0600 whatever the umask', () => {
    const old = process.umask(0o022);
    try {
      const dir = join(tmp(), 'a', 'state');
      const db = openDb(join(dir, 'channeld.db'));
      db.exec(`INSERT INTO sessions (agent, scope, created_at, last_active_at) VALUES ('a', 'b', 1, 1)`);
      expect(statSync(dir).mode & 0o777).toBe(0o700);
      for (const f of ['channeld.db', 'channeld.db-wal', 'channeld.db-shm']) expect(statSync(join(dir, f)).mode & 0o777, f).toBe(0o600);
      db.close();
    } finally {
      process.umask(old);
    }
  });

  it('narrows an existing world-readable state_dir and database', () => {
    const dir = tmp();
    const file = join(dir, 'channeld.db');
    new Database(file).close();
    expect(statSync(file).mode & 0o077).not.toBe(0);
    openDb(file).close();
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(statSync(file).mode & 0o777).toBe(0o600);
  });

  it('refuses a database from a newer channeld, naming both versions', () => {
    const file = join(tmp(), 'channeld.db');
    const other = new Database(file);
    other.pragma(`user_version = ${SCHEMA_VERSION + 5}`);
    other.close();
    const err = codeOf(() => openDb(file));
    expect(err.code).toBe('STORAGE_TOO_NEW');
    expect(err.message).toContain(`schema version ${SCHEMA_VERSION + 5}`);
    expect(err.message).toContain(`up to ${SCHEMA_VERSION}`);
  });

  it('reports a damaged page found by quick_check at start, with what to do', () => {
    const file = join(tmp(), 'channeld.db');
    const db = openDb(file);
    const ins = db.prepare(`INSERT INTO sessions (agent, scope, created_at, last_active_at) VALUES (?, ?, 1, 1)`);
    for (let i = 0; i < 400; i++) ins.run('agent', `scope-${i}-${'x'.repeat(100)}`);
    db.pragma('wal_checkpoint(TRUNCATE)');
    db.pragma('journal_mode = DELETE');
    db.close();
    const pageSize = 4096;
    const fd = openSync(file, 'r+');
    // Page 4 onwards belong to the tables and indexes: scribble over one of them.
    writeSync(fd, Buffer.alloc(pageSize, 0xa5), 0, pageSize, 5 * pageSize);
    closeSync(fd);
    const err = codeOf(() => openDb(file));
    expect(err.code).toBe('STORAGE_DAMAGED');
    expect(err.message).toMatch(/\.recover|move it aside/);
  });

  it('a file that is not a database at all is reported as damaged', () => {
    const file = join(tmp(), 'channeld.db');
    writeFileSync(file, 'not a database, just text '.repeat(200));
    expect(codeOf(() => openDb(file)).code).toBe('STORAGE_DAMAGED');
  });
});

describe('state_dir', () => {
  it('"/proc/nope" fails at once instead of hanging in mkdirSync', () => {
    const err = codeOf(() => prepareStateDir('/proc/nope/deeper'));
    expect(err.code).toBe('STATE_DIR_UNUSABLE');
    expect(err.message).toContain('/proc/nope');
  });

  it('a state_dir that is a file is refused, and check sees it without creating anything', () => {
    const file = join(tmp(), 'plain-file');
    writeFileSync(file, '');
    expect(codeOf(() => prepareStateDir(file)).message).toContain('is a file');
    expect(stateDirProblem(file)).toContain('is a file');
    expect(stateDirProblem(join(file, 'below'))).toContain('is a file');
    expect(stateDirProblem(join(tmp(), 'not', 'yet'))).toBeUndefined();
  });
});

describe('GroupCommit on a database that refuses writes', () => {
  it('a full database (max_page_count) never throws from the next tick: the batch waits, health says SQLITE_FULL, and it commits once there is room', async () => {
    const db = openDb(join(tmp(), 'channeld.db'));
    const changes: Array<[boolean, string | null]> = [];
    const health = new StorageHealth(undefined, (degraded, code) => changes.push([degraded, code]));
    const group = new GroupCommit(db, { health, retryMs: 5, maxRetryMs: 20 });
    const ins = db.prepare(`INSERT INTO sessions (agent, scope, created_at, last_active_at) VALUES ('a', ?, 1, 1)`);
    const pages = db.pragma('page_count', { simple: true }) as number;
    db.pragma(`max_page_count = ${pages}`);
    for (let i = 0; i < 200; i++) group.add(() => ins.run('y'.repeat(500) + i));
    await waitFor(() => !health.ok);
    expect(group.status()).toMatchObject({ state: 'degraded', code: 'SQLITE_FULL', pending_writes: 200 });
    db.pragma('max_page_count = 1000000');
    await waitFor(() => health.ok, 5000, 5);
    expect((db.prepare('SELECT COUNT(*) AS n FROM sessions').get() as { n: number }).n).toBe(200);
    expect(changes).toEqual([
      [true, 'SQLITE_FULL'],
      [false, null],
    ]);
    group.close();
    db.close();
  });
});
