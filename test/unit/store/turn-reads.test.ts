import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { ConversationStore } from '../../../src/store/conversations.js';
import { openDb, type Db } from '../../../src/store/db.js';
import { GroupCommit } from '../../../src/store/group-commit.js';
import { Inbox } from '../../../src/store/inbox.js';
import { SessionStore } from '../../../src/store/sessions.js';
import { readTurnStartsAlongside } from '../../../src/store/turn-reads.js';
import { userMessage } from '../../helpers/recording-adapter.js';

// The reads a new message's turn starts with ride its batch's transaction (real SQLite files;
// a second connection plays another process on the same file).

const dirs: string[] = [];
const dbs: Db[] = [];
afterEach(() => {
  for (const db of dbs.splice(0)) if (db.open) db.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function openFile(file?: string): { db: Db; file: string } {
  if (!file) {
    const dir = mkdtempSync(join(tmpdir(), 'channeld-turn-reads-'));
    dirs.push(dir);
    file = join(dir, 'channeld.db');
  }
  const db = openDb(file);
  dbs.push(db);
  return { db, file };
}

/**
 * The database with every SELECT counted when it runs outside a transaction: each such read
 * opens and closes a WAL read transaction of its own, which is what the batch's reads avoid.
 */
function countingReads(db: Db): { db: Db; outside: () => number } {
  let outside = 0;
  const counted = (statement: object) =>
    new Proxy(statement, {
      get(target, key) {
        const value = Reflect.get(target, key, target) as unknown;
        if (typeof value !== 'function') return value;
        if (key !== 'get' && key !== 'all') return value.bind(target);
        return (...args: unknown[]) => {
          if (!db.inTransaction) outside++;
          return value.apply(target, args);
        };
      },
    });
  const proxy = new Proxy(db, {
    get(target, key) {
      const value = Reflect.get(target, key, target) as unknown;
      if (key === 'prepare') return (sql: string) => (/^\s*SELECT/i.test(sql) ? counted(target.prepare(sql)) : target.prepare(sql));
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { db: proxy, outside: () => outside };
}

function stores(db: Db, group: GroupCommit) {
  const inbox = new Inbox(db, group);
  const sessions = new SessionStore(db, group);
  const conversations = new ConversationStore(db, group);
  readTurnStartsAlongside(inbox, { sessions, conversations }, () => 'default');
  return { inbox, sessions, conversations };
}

describe('the reads a turn starts with, alongside its message batch', () => {
  it('a batch of new and known conversations: their turns find preferences and sessions without a read of their own', async () => {
    const { db } = openFile();
    const reads = countingReads(db);
    const group = new GroupCommit(reads.db);
    // A conversation from before the restart: a session with one turn, and a queue mode.
    const before = stores(reads.db, group);
    const known = before.sessions.active('default', 't:known');
    before.sessions.append(known.id, { userText: 'q', assistantText: 'a', reasoning: '', toolCalls: [], ending: 'done', model: 'm' });
    before.conversations.update('default', 't:known', { queueMode: 'collect' });
    group.flush();

    const { inbox, sessions, conversations } = stores(reads.db, group);
    const scopes = ['t:new-1', 't:new-2', 't:known', 't:new-3'];
    const ids = await Promise.all(scopes.map((scope) => inbox.store(userMessage('t', 'hi'), scope)));
    expect(ids.every((id) => typeof id === 'number')).toBe(true);
    const outsideBefore = reads.outside();
    // What each turn asks, right after the batch committed (the same turn of the event loop).
    expect(scopes.map((scope) => conversations.get('default', scope).queueMode)).toEqual([undefined, undefined, 'collect', undefined]);
    const started = scopes.map((scope) => sessions.active('default', scope));
    expect(started[2]).toMatchObject({ id: known.id, turns: 1 });
    expect(new Set(started.map((s) => s.id)).size).toBe(4);
    expect(started.filter((s) => s.id !== known.id).every((s) => s.turns === 0)).toBe(true);
    expect(reads.outside() - outsideBefore).toBe(0);
    // The new sessions are stored as before: a restart finds each of them.
    group.flush();
    const again = new SessionStore(db);
    expect(scopes.map((scope) => again.active('default', scope).id)).toEqual(started.map((s) => s.id));
    group.close();
  });

  it('a turn that starts after the event loop turned reads again: what another process changed since the batch was stored is seen', async () => {
    const { db, file } = openFile();
    const group = new GroupCommit(db);
    // The old process during an upgrade, on the same file: its turns run while ours are held back.
    const old = openFile(file).db;
    const oldSessions = new SessionStore(old);
    const running = oldSessions.active('default', 't:running'); // its first turn runs there now
    const { inbox, sessions, conversations } = stores(db, group);
    await Promise.all(['t:running', 't:late'].map((scope) => inbox.store(userMessage('t', 'hi'), scope)));
    await nextTurn();
    // Meanwhile the old process ends its turn, a /model, and starts the other conversation's session.
    oldSessions.append(running.id, { userText: 'q', assistantText: 'a', reasoning: '', toolCalls: [], ending: 'done', model: 'm' });
    new ConversationStore(old).update('default', 't:running', { model: 'echo:b' });
    const late = oldSessions.active('default', 't:late');
    // Our turns start now (the upgrade let go of them).
    expect(sessions.active('default', 't:running')).toMatchObject({ id: running.id, turns: 1 });
    expect(conversations.get('default', 't:running').model).toBe('echo:b');
    expect(sessions.active('default', 't:late').id).toBe(late.id);
    group.close();
  });

  it('a session started after the batch was read for (/new, in the same turn of the loop) is the one its conversation keeps', () => {
    const { db } = openFile();
    const group = new GroupCommit(db);
    const sessions = new SessionStore(db, group);
    sessions.warm([['default', 't:a']]); // read alongside a batch: no session yet
    const started = sessions.start('default', 't:a'); // the batch's /new
    group.flush();
    // Enough other conversations in the same turn of the loop to empty the session cache at its bound.
    for (let i = 0; i <= 10_000; i++) sessions.active('default', `t:other-${i}`);
    expect(sessions.active('default', 't:a').id).toBe(started.id);
    group.close();
  });

  it("a storage fault in a read fails the batch, as SQLite's own rollback would: it is not stored and the fault is the batch's", async () => {
    const { db } = openFile();
    const inbox = new Inbox(db, new GroupCommit(db));
    inbox.readAlongside(() => {
      throw Object.assign(new Error('disk I/O error'), { code: 'SQLITE_IOERR' });
    });
    await expect(inbox.tryAdd(userMessage('t', 'hi'), 't:a')).rejects.toMatchObject({ code: 'STORAGE_UNAVAILABLE' });
    // A transaction SQLite already ended is not committed as if nothing happened.
    inbox.readAlongside(() => {
      db.exec('ROLLBACK');
      throw new Error('a read failed');
    });
    await expect(inbox.store(userMessage('t', 'hi'), 't:b')).rejects.toThrow('a read failed');
    expect((db.prepare(`SELECT COUNT(*) AS n FROM inbox`).get() as { n: number }).n).toBe(0);
  });

  it('only stored messages waiting for a turn are read for; a read that fails leaves the batch stored', async () => {
    const { db } = openFile();
    const group = new GroupCommit(db);
    const inbox = new Inbox(db, group);
    const seen: string[] = [];
    const inTransaction: boolean[] = [];
    inbox.readAlongside((stored) => {
      seen.push(...stored.map((s) => s.scope));
      inTransaction.push(db.inTransaction);
      throw new Error('a read failed');
    });
    const msg = userMessage('t', 'hi');
    const ids = await Promise.all([
      inbox.store(msg, 't:a'),
      inbox.store(msg, 't:a'), // the same message again: a redelivery
      inbox.store(userMessage('t', '/stop'), 't:b', 'done'), // a control, stored as done
      inbox.store(userMessage('t', 'hello'), 't:c'),
    ]);
    expect(ids.map((id) => typeof id)).toEqual(['number', 'undefined', 'number', 'number']);
    expect(seen).toEqual(['t:a', 't:c']);
    expect(inTransaction).toEqual([true]);
    expect((db.prepare(`SELECT COUNT(*) AS n FROM inbox`).get() as { n: number }).n).toBe(3);
    group.close();
  });
});
