import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ApprovalStore } from '../../../src/store/approvals.js';
import { ConversationStore } from '../../../src/store/conversations.js';
import { openDb, type Db } from '../../../src/store/db.js';
import { GroupCommit } from '../../../src/store/group-commit.js';
import { StorageHealth } from '../../../src/store/health.js';
import { Inbox } from '../../../src/store/inbox.js';
import { SESSION_ID_BLOCK, SessionStore } from '../../../src/store/sessions.js';
import { SqliteUsageLedger, startOfUtcDay, type UsageRecord } from '../../../src/store/usage-ledger.js';
import { foreignLock } from '../../helpers/foreign-lock.js';
import { waitFor } from '../../helpers/daemon.js';
import { userMessage } from '../../helpers/recording-adapter.js';

// The SQLite stores on real databases: in memory where one connection is enough, in a file
// where a second connection (another process's lock) is part of the test.

const dirs: string[] = [];
const dbs: Db[] = [];
afterEach(() => {
  for (const db of dbs.splice(0)) if (db.open) db.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function memory(): Db {
  const db = openDb(':memory:');
  dbs.push(db);
  return db;
}
function onDisk(): { db: Db; file: string } {
  const dir = mkdtempSync(join(tmpdir(), 'channeld-store-'));
  dirs.push(dir);
  const file = join(dir, 'channeld.db');
  const db = openDb(file);
  dbs.push(db);
  return { db, file };
}
const turn = (n: number) => ({ userText: `q${n}`, assistantText: `a${n}`, reasoning: '', toolCalls: [{ call: n }], ending: 'done' as const, model: 'm' });
const count = (db: Db, table: string) => (db.prepare(`SELECT COUNT(*) AS n FROM ${table}`).get() as { n: number }).n;

describe('SessionStore', () => {
  it('keeps one active session per agent and scope; /new starts another and the old one keeps its turns', () => {
    const db = memory();
    const s = new SessionStore(db);
    const a = s.active('default', 'tg:1');
    expect(s.active('default', 'tg:1').id).toBe(a.id);
    expect(s.active('other', 'tg:1').id).not.toBe(a.id);
    s.append(a.id, turn(1));
    s.append(a.id, turn(2));
    expect(s.active('default', 'tg:1').turns).toBe(2);
    const b = s.start('default', 'tg:1');
    expect(s.active('default', 'tg:1')).toMatchObject({ id: b.id, turns: 0 });
    expect(s.recent(a.id).map((t) => t.userText)).toEqual(['q1', 'q2']);
    // A new store over the same database (a restart) finds the newest session and counts its turns.
    s.append(b.id, turn(3));
    expect(new SessionStore(db).active('default', 'tg:1')).toMatchObject({ id: b.id, turns: 1 });
  });

  it('counts each turn in its own session only, across many conversations and after /new', () => {
    const s = new SessionStore(memory());
    const ids = Array.from({ length: 50 }, (_, i) => s.active('default', `tg:${i}`).id);
    ids.forEach((id, i) => {
      for (let k = 0; k <= i % 3; k++) s.append(id, turn(k));
    });
    for (const i of ids.keys()) expect(s.active('default', `tg:${i}`).turns).toBe((i % 3) + 1);
    const old = ids[0]!;
    const fresh = s.start('default', 'tg:0');
    // A turn of the old session that ends after /new does not count in the new one.
    s.append(old, turn(9));
    expect(s.active('default', 'tg:0')).toMatchObject({ id: fresh.id, turns: 0 });
    s.append(fresh.id, turn(10));
    expect(s.active('default', 'tg:0')).toMatchObject({ id: fresh.id, turns: 1 });
  });

  it('recent() gives the newest turns oldest first, with tool calls parsed', () => {
    const s = new SessionStore(memory());
    const { id } = s.active('default', 'c');
    for (let i = 0; i < 6; i++) s.append(id, turn(i));
    const last = s.recent(id, 2);
    expect(last.map((t) => t.assistantText)).toEqual(['a4', 'a5']);
    expect(last[1]).toMatchObject({ toolCalls: [{ call: 5 }], ending: 'done', model: 'm' });
    expect(last[0]!.createdAt).toBeLessThanOrEqual(last[1]!.createdAt);
  });

  it('a turn appended through the group commit is read back at once: recent() flushes first', () => {
    const db = memory();
    const group = new GroupCommit(db);
    const s = new SessionStore(db, group);
    const { id } = s.active('default', 'c');
    s.append(id, turn(1));
    // Not committed yet: it waits for the next tick...
    expect(count(db, 'turns')).toBe(0);
    // ...but the next turn of the conversation must see it.
    expect(s.recent(id).map((t) => t.userText)).toEqual(['q1']);
    expect(count(db, 'turns')).toBe(1);
    group.close();
  });

  it('summary counts sessions per scope under a prefix, newest activity first', () => {
    const s = new SessionStore(memory());
    s.active('x', 'tg:1');
    s.start('x', 'tg:1');
    s.active('x', 'tg:2');
    s.active('x', 'sl:1');
    s.active('y', 'tg:3');
    const rows = s.summary('x', 'tg:');
    expect(rows.map((r) => [r.scope, r.sessions]).sort()).toEqual([
      ['tg:1', 2],
      ['tg:2', 1],
    ]);
    expect(rows[0]!.lastActiveAt).toBeGreaterThanOrEqual(rows[1]!.lastActiveAt);
  });
});

describe('SessionStore with a group commit: new sessions ride it, ids from claimed blocks', () => {
  const sessionRows = (db: Db) =>
    db.prepare(`SELECT id, agent, scope FROM sessions WHERE agent <> '' ORDER BY id`).all() as Array<{ id: number; agent: string; scope: string }>;

  it("a new conversation's session costs no commit of its own: its row waits for the group, and recent() does not force it", () => {
    const db = memory();
    const group = new GroupCommit(db);
    const s = new SessionStore(db, group);
    s.active('default', 'first'); // claims a block
    const before = count(db, 'sessions');
    const { id } = s.active('default', 'tg:1');
    expect(s.recent(id)).toEqual([]);
    expect(count(db, 'sessions')).toBe(before);
    group.flush();
    expect(sessionRows(db).map((r) => r.scope)).toEqual(['first', 'tg:1']);
    // A restart finds it, and ids go on above every claimed block.
    const again = new SessionStore(db, group);
    expect(again.active('default', 'tg:1').id).toBe(id);
    expect(again.active('default', 'tg:2').id).toBeGreaterThan(id);
    group.close();
  });

  it("while another process holds the write lock, a new conversation's session starts at once and is stored once the lock is gone", async () => {
    const { db, file } = onDisk();
    const group = new GroupCommit(db, { retryMs: 5, maxRetryMs: 20 });
    const s = new SessionStore(db, group);
    s.active('default', 'first');
    group.flush();
    const { release } = foreignLock(file);
    // Before, this INSERT ran on its own and failed with SQLITE_BUSY (the turn then waited).
    const info = s.active('default', 'tg:1');
    expect(info.turns).toBe(0);
    s.append(info.id, turn(1));
    group.flush();
    expect(group.status()).toMatchObject({ state: 'degraded', code: 'SQLITE_BUSY' });
    release();
    await waitFor(() => group.health.ok);
    expect(new SessionStore(db).active('default', 'tg:1')).toMatchObject({ id: info.id, turns: 1 });
    group.close();
  });

  it('two processes on one file, and an older build inserting with SQLite ids, never take one id twice', () => {
    const { db, file } = onDisk();
    const other = openDb(file);
    dbs.push(other);
    const groupA = new GroupCommit(db);
    const groupB = new GroupCommit(other);
    const a = new SessionStore(db, groupA);
    const b = new SessionStore(other, groupB);
    // An older build: the row and its id in one INSERT.
    const older = other.prepare(`INSERT INTO sessions (agent, scope, created_at, last_active_at) VALUES ('default', ?, 0, 0) RETURNING id`);
    const ids: number[] = [];
    for (let i = 0; i < 1500; i++) {
      ids.push(a.active('default', `a:${i}`).id, b.active('default', `b:${i}`).id);
      if (i % 100 === 0) ids.push((older.get(`old:${i}`) as { id: number }).id);
      if (i % 7 === 0) {
        groupA.flush();
        groupB.flush();
      }
    }
    groupA.flush();
    groupB.flush();
    expect(new Set(ids).size).toBe(ids.length);
    expect(sessionRows(db)).toHaveLength(ids.length);
    groupA.close();
    groupB.close();
  });

  it('sessions not stored yet stay known when the cache is emptied at its bound: no second session for their conversation', () => {
    const db = memory();
    const group = new GroupCommit(db);
    const s = new SessionStore(db, group);
    const first = s.active('default', 'c:0').id;
    // All in one tick: nothing is committed while the cache passes its 10,000 entries.
    for (let i = 1; i <= 10_001; i++) s.active('default', `c:${i}`);
    expect(s.active('default', 'c:0').id).toBe(first);
    group.flush();
    expect(count(db, 'sessions')).toBe(10_002 + Math.ceil(10_002 / SESSION_ID_BLOCK));
    group.close();
  });

  it('summary counts sessions whose row still waits in the group', () => {
    const db = memory();
    const group = new GroupCommit(db);
    const s = new SessionStore(db, group);
    s.active('x', 'tg:1');
    s.start('x', 'tg:1');
    expect(s.summary('x', 'tg:').map((r) => [r.scope, r.sessions])).toEqual([['tg:1', 2]]);
    group.close();
  });
});

describe('ConversationStore', () => {
  it('starts empty, merges each patch, and keeps it across a restart', () => {
    const db = memory();
    const c = new ConversationStore(db);
    expect(c.get('default', 'tg:1')).toEqual({});
    c.update('default', 'tg:1', { model: 'big' });
    expect(c.update('default', 'tg:1', { modes: { terse: true } })).toEqual({ model: 'big', modes: { terse: true } });
    c.update('default', 'tg:1', { model: undefined, queueMode: 'collect' });
    const again = new ConversationStore(db);
    expect(again.get('default', 'tg:1')).toEqual({ queueMode: 'collect', modes: { terse: true } });
    expect(again.get('other', 'tg:1')).toEqual({});
  });

  it('while another process holds the write lock the choice applies at once, and is stored once the lock is gone', async () => {
    const { db, file } = onDisk();
    const group = new GroupCommit(db, { retryMs: 5, maxRetryMs: 20 });
    const c = new ConversationStore(db, group);
    const { release } = foreignLock(file);
    c.update('default', 'tg:1', { model: 'small' });
    expect(c.get('default', 'tg:1')).toEqual({ model: 'small' });
    expect(group.status()).toMatchObject({ state: 'degraded', code: 'SQLITE_BUSY', pending_writes: 1 });
    release();
    await waitFor(() => group.health.ok);
    expect(new ConversationStore(db).get('default', 'tg:1')).toEqual({ model: 'small' });
    group.close();
  });
});

describe('SqliteUsageLedger', () => {
  const rec = (over: Partial<UsageRecord>): UsageRecord => ({
    at: 1000,
    agent: 'a',
    model: 'm',
    channel: 'tg',
    scope: 'tg:1',
    inputTokens: 10,
    outputTokens: 5,
    reasoningTokens: 0,
    cachedTokens: 0,
    estimated: false,
    cost: 0.5,
    ...over,
  });

  it('sums turns by filter: since inclusive, until exclusive, every given field must match', async () => {
    const u = new SqliteUsageLedger(memory());
    u.record(rec({ at: 1000 }));
    u.record(rec({ at: 2000, model: 'n', cost: null, estimated: true, reasoningTokens: 3, cachedTokens: 2 }));
    u.record(rec({ at: 3000, channel: 'sl', scope: 'sl:1' }));
    expect(await u.totals({})).toEqual({ turns: 3, input_tokens: 30, output_tokens: 15, reasoning_tokens: 3, cached_tokens: 2, estimated_turns: 1, cost: 1 });
    expect(await u.totals({ sinceMs: 2000, untilMs: 3000 })).toMatchObject({ turns: 1, cost: 0 });
    expect(await u.totals({ sinceMs: 2000 })).toMatchObject({ turns: 2 });
    expect(await u.totals({ channel: 'tg', model: 'm' })).toMatchObject({ turns: 1 });
    expect(await u.totals({ scope: 'nowhere' })).toEqual({
      turns: 0,
      input_tokens: 0,
      output_tokens: 0,
      reasoning_tokens: 0,
      cached_tokens: 0,
      estimated_turns: 0,
      cost: 0,
    });
  });

  it('breaks usage down per channel, agent and model, in that order', async () => {
    const u = new SqliteUsageLedger(memory());
    u.record(rec({ channel: 'tg', model: 'z' }));
    u.record(rec({ channel: 'sl' }));
    u.record(rec({ channel: 'tg', model: 'm' }));
    u.record(rec({ channel: 'tg', model: 'm' }));
    expect((await u.breakdown({})).map((r) => [r.channel, r.agent, r.model, r.turns])).toEqual([
      ['sl', 'a', 'm', 1],
      ['tg', 'a', 'm', 2],
      ['tg', 'a', 'z', 1],
    ]);
  });

  it('through the group commit, a turn just recorded is already in the totals', async () => {
    const db = memory();
    const group = new GroupCommit(db);
    const u = new SqliteUsageLedger(db, group);
    u.record(rec({}));
    expect((await u.totals({})).turns).toBe(1);
    group.close();
  });

  it('the daily budget read is kept from the first one on: it neither forces the group commit nor sums the day again each turn', () => {
    const db = memory();
    const group = new GroupCommit(db);
    const u = new SqliteUsageLedger(db, group);
    const day = 1_000_000;
    u.record(rec({ at: day + 1, cost: 0.5 }));
    u.record(rec({ at: day - 1, cost: 9 })); // the day before
    expect(u.costSince('a', day)).toBeCloseTo(0.5);
    // A turn's usage waits with its other closing writes; the budget read counts it at once.
    u.record(rec({ at: day + 2, cost: 0.25 }));
    u.record(rec({ at: day + 3, cost: null }));
    u.record(rec({ at: day + 4, agent: 'b', cost: 4 }));
    expect(u.costSince('a', day)).toBeCloseTo(0.75);
    expect(group.status().pending_writes).toBe(3);
    expect(u.costSince('b', day)).toBeCloseTo(4);
    // A new day is summed from the table (once).
    expect(u.costSince('a', day + 3)).toBe(0);
    expect(u.costSince('a', day - 10)).toBeCloseTo(9.75);
    group.close();
  });

  it('the daily budget read sees turns another process committed to the same file', () => {
    const { db, file } = onDisk();
    const u = new SqliteUsageLedger(db, new GroupCommit(db));
    expect(u.costSince('a', 0)).toBe(0);
    const other = openDb(file);
    new SqliteUsageLedger(other).record(rec({ cost: 2 }));
    expect(u.costSince('a', 0)).toBeCloseTo(2);
    other.close();
  });

  it('startOfUtcDay is midnight UTC of the day the time falls in', () => {
    const at = Date.UTC(2026, 2, 14, 23, 59, 59);
    expect(startOfUtcDay(at)).toBe(Date.UTC(2026, 2, 14));
    expect(startOfUtcDay(Date.UTC(2026, 2, 15))).toBe(Date.UTC(2026, 2, 15));
  });
});

describe('ApprovalStore', () => {
  it('keeps a question, its decision and its prompt; asking again after a restart resets the decision only', async () => {
    const db = memory();
    const a = new ApprovalStore(db);
    expect(await a.get('turn-1:call-1')).toBeUndefined();
    await a.ask('turn-1:call-1', 'ab12', 'tg:1', 'shell');
    expect(await a.get('turn-1:call-1')).toMatchObject({ id: 'ab12', scope: 'tg:1', tool: 'shell', state: 'pending', decidedBy: null, promptRef: null });
    await a.update('turn-1:call-1', 'pending', { promptRef: '{"messageId":"9"}' });
    await a.update('turn-1:call-1', 'approved', { decidedBy: 'ada' });
    expect(await a.get('turn-1:call-1')).toMatchObject({ state: 'approved', decidedBy: 'ada', promptRef: '{"messageId":"9"}' });
    // A re-run after a crash asks again under a new id; the old prompt is kept so it can be retired.
    const again = new ApprovalStore(db);
    await again.ask('turn-1:call-1', 'cd34', 'tg:1', 'shell');
    expect(await again.get('turn-1:call-1')).toMatchObject({ id: 'cd34', state: 'pending', decidedBy: null, promptRef: '{"messageId":"9"}' });
    await again.update('turn-1:call-1', 'done', { result: 'ok' });
    await again.update('turn-1:call-1', 'done');
    expect(await again.get('turn-1:call-1')).toMatchObject({ state: 'done', result: 'ok' });
  });

  it('a state outside the lifecycle is refused by the database', async () => {
    const a = new ApprovalStore(memory());
    await a.ask('k', 'id', 's', 't');
    await expect(a.update('k', 'maybe' as never)).rejects.toThrow(/CHECK constraint/);
  });
});

describe('GroupCommit', () => {
  it('writes added in one tick commit together on the next, in one transaction', async () => {
    const db = memory();
    const group = new GroupCommit(db);
    const ins = db.prepare(`INSERT INTO sessions (agent, scope, created_at, last_active_at) VALUES ('a', ?, 1, 1)`);
    const inTx: boolean[] = [];
    for (let i = 0; i < 3; i++) group.add(() => (inTx.push(db.inTransaction), ins.run(`s${i}`)));
    expect(count(db, 'sessions')).toBe(0);
    await new Promise((r) => setImmediate(r));
    expect(count(db, 'sessions')).toBe(3);
    expect(inTx).toEqual([true, true, true]);
    group.close();
  });

  it('one write with wrong SQL is dropped and reported; the others in its batch still commit', () => {
    const db = memory();
    const dropped: unknown[] = [];
    const group = new GroupCommit(db, { onDropped: (err) => dropped.push(err) });
    const ins = db.prepare(`INSERT INTO sessions (agent, scope, created_at, last_active_at) VALUES ('a', ?, 1, 1)`);
    group.add(() => ins.run('one'));
    group.add(() => db.prepare('INSERT INTO nowhere VALUES (1)').run());
    group.add(() => ins.run('two'));
    group.flush();
    expect(count(db, 'sessions')).toBe(2);
    expect(dropped).toHaveLength(1);
    expect(String(dropped[0])).toContain('nowhere');
    expect(group.health.ok).toBe(true);
    group.close();
  });

  it("another process's write lock: now() queues behind what waits, order is kept, and everything commits once the lock is gone", async () => {
    const { db, file } = onDisk();
    const group = new GroupCommit(db, { retryMs: 5, maxRetryMs: 20 });
    const order = db.prepare(`INSERT INTO sessions (agent, scope, created_at, last_active_at) VALUES ('a', ?, 1, 1)`);
    const { release } = foreignLock(file);
    group.add(() => order.run('first'));
    group.flush();
    expect(group.status()).toMatchObject({ state: 'degraded', code: 'SQLITE_BUSY', pending_writes: 1 });
    // Degraded: a write that would go at once waits behind the queue instead of jumping it.
    group.now(() => order.run('second'));
    expect(group.status().pending_writes).toBe(2);
    release();
    await waitFor(() => group.health.ok);
    expect((db.prepare('SELECT scope FROM sessions ORDER BY id').all() as { scope: string }[]).map((r) => r.scope)).toEqual(['first', 'second']);
    expect(group.status()).toMatchObject({ state: 'ok', pending_writes: 0 });
    group.close();
  });

  it('close() makes a last attempt and says how many writes could not be committed', () => {
    const { db, file } = onDisk();
    const group = new GroupCommit(db, { retryMs: 60_000 });
    const { release } = foreignLock(file);
    group.add(() => db.prepare(`INSERT INTO sessions (agent, scope, created_at, last_active_at) VALUES ('a', 'x', 1, 1)`).run());
    group.flush();
    expect(group.close()).toBe(1);
    release();
  });
});

/** An inbox row as the next process would read it. */
function stored(db: Db, id: number) {
  const r = db.prepare('SELECT id, scope, payload, state, reply_refs FROM inbox WHERE id = ?').get(id) as
    | { id: number; scope: string; payload: string; state: string; reply_refs: string }
    | undefined;
  return (
    r && { id: r.id, scope: r.scope, state: r.state, replyRefs: JSON.parse(r.reply_refs) as unknown[], message: JSON.parse(r.payload) as { text: string } }
  );
}

describe('Inbox', () => {
  it('stores a message once: a second delivery of the same (channel, message id) is recognised', () => {
    const db = memory();
    const inbox = new Inbox(db);
    const msg = userMessage('t', 'hi');
    const id = inbox.add(msg, 't:chat-1');
    expect(id).toBeTypeOf('number');
    expect(inbox.add({ ...msg, text: 'changed' }, 't:chat-1')).toBeUndefined();
    expect(inbox.add({ ...msg, channelId: 'other' }, 'other:chat-1')).toBeTypeOf('number');
    expect(stored(db, id!)).toMatchObject({ id, scope: 't:chat-1', state: 'pending', replyRefs: [], message: { text: 'hi' } });
  });

  it('messages stored in one microtask are committed together after it, and resolve in the order asked', async () => {
    const db = memory();
    const inbox = new Inbox(db);
    const msgs = [userMessage('t', 'a'), userMessage('t', 'b'), userMessage('t', 'c')];
    const pending = [...msgs.map((m) => inbox.store(m, 't:chat-1')), inbox.store(msgs[0]!, 't:chat-1')];
    expect(count(db, 'inbox')).toBe(0);
    const ids = await Promise.all(pending);
    expect(ids.slice(0, 3).map((id) => stored(db, id!)!.message.text)).toEqual(['a', 'b', 'c']);
    expect(ids[3]).toBeUndefined(); // the duplicate in the same batch
    expect(count(db, 'inbox')).toBe(3);
  });

  it('a state change through the group commit: done waits for the next tick, running (from the first reply) is recorded with the refs', () => {
    const db = memory();
    const group = new GroupCommit(db);
    const inbox = new Inbox(db, group);
    const id = inbox.add(userMessage('t', 'x'), 't:c')!;
    inbox.setReplyRefs(id, [{ chatId: 'c', messageId: 'm1' }]);
    group.flush();
    expect(stored(db, id)).toMatchObject({ state: 'running', replyRefs: [{ chatId: 'c', messageId: 'm1' }] });
    inbox.setState(id, 'done');
    expect(stored(db, id)!.state).toBe('running');
    group.flush();
    expect(stored(db, id)!.state).toBe('done');
    // The store decides no state: refs on a finished item are refused before they get here,
    // by the item lifecycle (test/unit/inbox/lifecycle.test.ts, "replied from done").
    group.close();
  });

  it('refs and the end of a reply asked in one tick commit as one: refs, final state and error together', () => {
    const db = memory();
    const group = new GroupCommit(db);
    const inbox = new Inbox(db, group);
    const [a, b] = ['a', 'b'].map((t) => inbox.add(userMessage('t', t), 't:c')!);
    inbox.setReplyRefs(a!, [{ chatId: 'c', messageId: 'm1' }]);
    inbox.setReplyRefs(a!, [
      { chatId: 'c', messageId: 'm1' },
      { chatId: 'c', messageId: 'm2' },
    ]);
    inbox.setState(a!, 'done');
    inbox.setReplyRefs(b!, [{ chatId: 'c', messageId: 'm3' }]);
    inbox.setState(b!, 'failed', 'boom');
    expect(stored(db, a!)!.state).toBe('pending');
    group.flush();
    expect(stored(db, a!)).toMatchObject({ state: 'done', replyRefs: [{ messageId: 'm1' }, { messageId: 'm2' }] });
    expect(stored(db, b!)).toMatchObject({ state: 'failed', replyRefs: [{ messageId: 'm3' }] });
    expect((db.prepare('SELECT error FROM inbox WHERE id = ?').get(b!) as { error: string }).error).toBe('boom');
    // Once the refs are written, a later end is its own write.
    inbox.setReplyRefs(a!, [{ chatId: 'c', messageId: 'm4' }]);
    group.flush();
    inbox.setState(a!, 'done');
    group.flush();
    expect(stored(db, a!)).toMatchObject({ state: 'done', replyRefs: [{ messageId: 'm4' }] });
    group.close();
  });

  it('unfinished() lists pending and running items oldest first; prune() deletes only finished ones past retention', () => {
    const db = memory();
    const inbox = new Inbox(db);
    const ids = ['p', 'r', 'd', 'f', 'x'].map((t) => inbox.add(userMessage('t', t), 't:c')!);
    inbox.setReplyRefs(ids[1]!, [{ chatId: 'c', messageId: 'm' }]);
    inbox.setState(ids[2]!, 'done');
    inbox.setState(ids[3]!, 'failed', 'boom');
    inbox.setState(ids[4]!, 'refused');
    expect(inbox.unfinished().map((i) => [i.message.text, i.state])).toEqual([
      ['p', 'pending'],
      ['r', 'running'],
    ]);
    expect(inbox.prune(1, Date.now())).toBe(0);
    expect(inbox.prune(1, Date.now() + 2 * 3_600_000)).toBe(3);
    expect(count(db, 'inbox')).toBe(2);
  });

  it('addDurable refuses with STORAGE_UNAVAILABLE (retryable) while the store is degraded by a full disk, and stores once it is not', async () => {
    const db = memory();
    const health = new StorageHealth();
    const group = new GroupCommit(db, { health });
    const inbox = new Inbox(db, group);
    health.fail(Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' }));
    expect(inbox.writable).toBe(false);
    await expect(inbox.addDurable(userMessage('t', 'x'), 't:c')).rejects.toMatchObject({ code: 'STORAGE_UNAVAILABLE', retryable: true });
    expect(count(db, 'inbox')).toBe(0);
    health.recover();
    expect(await inbox.addDurable(userMessage('t', 'y'), 't:c')).toBeTypeOf('number');
    group.close();
  });

  it("addDurable waits out another process's short write lock instead of refusing the message", async () => {
    const { db, file } = onDisk();
    const group = new GroupCommit(db, { retryMs: 5, maxRetryMs: 20 });
    const inbox = new Inbox(db, group);
    const { release } = foreignLock(file);
    const stored = inbox.addDurable(userMessage('t', 'patient'), 't:c');
    await waitFor(() => !group.health.ok);
    release();
    expect(await stored).toBeTypeOf('number');
    expect(inbox.unfinished().map((i) => i.message.text)).toEqual(['patient']);
    group.close();
  });

  it('whenWritable finds a foreign write lock by a no-op write, waits it out, and says so once; tryAdd refuses at once meanwhile', async () => {
    const { db, file } = onDisk();
    const group = new GroupCommit(db, { retryMs: 5, maxRetryMs: 20 });
    const inbox = new Inbox(db, group);
    expect(await group.whenWritable(new AbortController().signal)).toBe(true);
    const { release } = foreignLock(file);
    await expect(inbox.tryAdd(userMessage('t', 'now'), 't:c')).rejects.toMatchObject({ code: 'STORAGE_UNAVAILABLE', retryable: true });
    let waits = 0;
    const writable = group.whenWritable(new AbortController().signal, () => waits++);
    await waitFor(() => waits === 1);
    release();
    expect(await writable).toBe(true);
    expect(waits).toBe(1);
    const aborted = new AbortController();
    aborted.abort();
    expect(await group.whenWritable(aborted.signal)).toBe(false);
    group.close();
  });

  it('whenWritable callers of one tick share one commit: the queued turn writes when there are some, one no-op write when there are none', async () => {
    const { db } = onDisk();
    const group = new GroupCommit(db);
    const sessions = new SessionStore(db, group);
    let noOps = 0;
    const pragma = db.pragma.bind(db);
    db.pragma = ((source: string, options?: { simple?: boolean }) => {
      if (source.startsWith('user_version =')) noOps++;
      return pragma(source, options);
    }) as typeof db.pragma;
    const signal = new AbortController().signal;
    expect(await Promise.all([1, 2, 3, 4, 5].map(() => group.whenWritable(signal)))).toEqual([true, true, true, true, true]);
    expect(noOps).toBe(1);
    // A turn's closing writes are queued: they are the commit that answers, no no-op write.
    const s = sessions.active('a', 'x');
    sessions.append(s.id, { userText: 'q', assistantText: 'a', reasoning: '', toolCalls: [], ending: 'done', model: null });
    expect(await Promise.all([group.whenWritable(signal), group.whenWritable(signal)])).toEqual([true, true]);
    expect(noOps).toBe(1);
    expect(sessions.recent(s.id)).toHaveLength(1);
    group.close();
  });
});
