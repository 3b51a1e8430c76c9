import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { migrate } from '../../src/cluster/migrations.js';
import { PgConversationStore, PgSessionStore, PgWriter } from '../../src/cluster/pg-state.js';
import { ConversationStore, type Conversations } from '../../src/store/conversations.js';
import { openDb } from '../../src/store/db.js';
import { GroupCommit } from '../../src/store/group-commit.js';
import { SessionStore, type Sessions } from '../../src/store/sessions.js';
import { clusterSkipReason, PG_URL, quietLogger, uniqueNamespace } from '../helpers/cluster.js';

/** One backend as the contract sees it: stores over one database, and how a turn uses them. */
interface Backend {
  /** Stores as a freshly started instance has them, over the same database. */
  open(): { sessions: Sessions; conversations: Conversations; prepare(agent: string, scope: string): Promise<void>; flush(): Promise<void> };
}

const turn = (n: number) => ({ userText: `q${n}`, assistantText: `a${n}`, reasoning: '', toolCalls: [{ n }], ending: 'done' as const, model: 'm' });

/** The same tests for every backend: what the runtime and the actions rely on. */
function contract(name: string, backend: () => Promise<Backend>) {
  describe(`store contract: ${name}`, () => {
    it('a scope’s active session is created on first use, kept, replaced by start(); turns come back oldest first', async () => {
      const b = await backend();
      const s = b.open();
      await s.prepare('default', 'tg:1');
      const first = s.sessions.active('default', 'tg:1');
      expect(s.sessions.active('default', 'tg:1').id).toBe(first.id);
      for (let i = 0; i < 5; i++) s.sessions.append(first.id, turn(i));
      expect(s.sessions.recent(first.id, 3).map((t) => t.userText)).toEqual(['q2', 'q3', 'q4']);
      expect(s.sessions.recent(first.id)[0]!.toolCalls).toEqual([{ n: 0 }]);
      expect(s.sessions.active('default', 'tg:1').turns).toBe(5);
      await s.flush();

      // Another instance (or a restart) sees the same session and its turns.
      const again = b.open();
      await again.prepare('default', 'tg:1');
      const seen = again.sessions.active('default', 'tg:1');
      expect(seen).toMatchObject({ id: first.id, turns: 5 });
      expect(again.sessions.recent(seen.id).map((t) => t.assistantText)).toEqual(['a0', 'a1', 'a2', 'a3', 'a4']);
      const fresh = again.sessions.start('default', 'tg:1');
      expect(fresh.id).not.toBe(first.id);
      expect(again.sessions.active('default', 'tg:1').id).toBe(fresh.id);
      expect(again.sessions.recent(fresh.id)).toEqual([]);
      await again.flush();
      const third = b.open();
      await third.prepare('default', 'tg:1');
      expect(third.sessions.active('default', 'tg:1').id).toBe(fresh.id);
    });

    it('sessions are per agent and scope; summary counts them under a prefix', async () => {
      const b = await backend();
      const s = b.open();
      for (const scope of ['sl:a', 'sl:b', 'tg:1']) await s.prepare('x', scope);
      s.sessions.active('x', 'sl:a');
      s.sessions.start('x', 'sl:a');
      s.sessions.active('x', 'sl:b');
      s.sessions.active('x', 'tg:1');
      await s.prepare('y', 'sl:a');
      s.sessions.active('y', 'sl:a');
      await s.flush();
      const rows = await b.open().sessions.summary('x', 'sl:');
      expect(rows.map((r) => [r.scope, r.sessions]).sort()).toEqual([
        ['sl:a', 2],
        ['sl:b', 1],
      ]);
    });

    it('summary takes the prefix literally: _ and % in a channel id are not wildcards', async () => {
      const b = await backend();
      const s = b.open();
      for (const scope of ['a_b:1', 'aXb:1', 'a%c:1', 'a%cd:2']) await s.prepare('x', scope);
      for (const scope of ['a_b:1', 'aXb:1', 'a%c:1', 'a%cd:2']) s.sessions.active('x', scope);
      await s.flush();
      const reader = b.open();
      expect((await reader.sessions.summary('x', 'a_b:')).map((r) => r.scope)).toEqual(['a_b:1']);
      expect((await reader.sessions.summary('x', 'a%c:')).map((r) => r.scope)).toEqual(['a%c:1']);
    });

    it('conversation preferences merge and survive a restart', async () => {
      const b = await backend();
      const s = b.open();
      await s.prepare('default', 'tg:9');
      expect(s.conversations.get('default', 'tg:9')).toEqual({});
      s.conversations.update('default', 'tg:9', { model: 'big' });
      s.conversations.update('default', 'tg:9', { queueMode: 'collect', modes: { terse: true } });
      expect(s.conversations.get('default', 'tg:9')).toEqual({ model: 'big', queueMode: 'collect', modes: { terse: true } });
      await s.flush();
      const again = b.open();
      await again.prepare('default', 'tg:9');
      expect(again.conversations.get('default', 'tg:9')).toEqual({ model: 'big', queueMode: 'collect', modes: { terse: true } });
      await again.prepare('other', 'tg:9');
      expect(again.conversations.get('other', 'tg:9')).toEqual({});
    });
  });
}

contract('SQLite', async () => {
  const db = openDb(':memory:');
  const group = new GroupCommit(db);
  return {
    open: () => ({ sessions: new SessionStore(db, group), conversations: new ConversationStore(db), prepare: async () => {}, flush: async () => group.flush() }),
  };
});

const skip = await clusterSkipReason();
const pools: Array<{ pool: pg.Pool; schema: string }> = [];
afterAll(async () => {
  for (const { pool, schema } of pools) {
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await pool.end();
  }
});
if (skip === undefined) {
  contract('PostgreSQL', async () => {
    // Each test in its own schema.
    const schema = uniqueNamespace();
    const pool = new pg.Pool({ connectionString: PG_URL, options: `-c search_path=${schema}`, max: 4 });
    pools.push({ pool, schema });
    await migrate(pool, schema);
    const { log } = quietLogger();
    return {
      open: () => {
        const w = new PgWriter(pool, log);
        const sessions = new PgSessionStore(w);
        const conversations = new PgConversationStore(w);
        return {
          sessions,
          conversations,
          prepare: async (agent, scope) => {
            await sessions.prepare(agent, scope);
            await conversations.prepare(agent, scope);
          },
          flush: () => w.flush(),
        };
      },
    };
  });
} else {
  describe.skip(`store contract: PostgreSQL (skipped: ${skip})`, () => {
    it('needs PostgreSQL', () => {});
  });
}
