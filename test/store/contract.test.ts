import { describe, expect, it } from 'vitest';
import { PgApprovalStore } from '../../src/cluster/pg-approvals.js';
import { PgConversationStore, PgSessionStore } from '../../src/cluster/pg-state.js';
import { PgWriter } from '../../src/cluster/pg-writer.js';
import { PgUsageLedger } from '../../src/cluster/pg-usage.js';
import { ApprovalStore, type Approvals } from '../../src/store/approvals.js';
import { LocalReservations, type SpendQuota, type SpendReservations } from '../../src/store/reservations.js';
import { PgReservations } from '../../src/cluster/pg-reservations.js';
import type { AgentConfig } from '../../src/config/schema.js';
import { conversationStatus } from '../../src/runtime/builtins.js';
import { ConversationStore, type Conversations } from '../../src/store/conversations.js';
import { openDb } from '../../src/store/db.js';
import { GroupCommit } from '../../src/store/group-commit.js';
import { SqliteSettledWindows } from '../../src/store/spend-windows.js';
import { SessionStore, type Sessions } from '../../src/store/sessions.js';
import { SqliteUsageLedger, startOfUtcDay, type UsageLedger, type UsageRecord } from '../../src/store/usage-ledger.js';
import { clusterSkipReason, quietLogger } from '../helpers/cluster.js';
import { migratedPools } from '../helpers/pg-schemas.js';

/** One backend as the contract sees it: stores over one database, and how a turn uses them. */
interface Backend {
  /** Stores as a freshly started instance has them, over the same database. */
  open(): {
    sessions: Sessions;
    conversations: Conversations;
    usage: UsageLedger;
    approvals: Approvals;
    spend: SpendReservations;
    /** What the instance does before a turn of (agent, scope); `budgetSinceMs`: the agent has a daily budget from then. */
    prepare(agent: string, scope: string, budgetSinceMs?: number): Promise<void>;
    flush(): Promise<void>;
  };
  /** Spend reservations as a process started again over the same database has them. */
  restarted(): SpendReservations;
}

const DAY = 86_400_000;
const use = (at: number, agent: string, channel: string, model: string, n: number, cost: number | null, estimated = false): UsageRecord => ({
  at,
  agent,
  model,
  channel,
  scope: `${channel}:${n}`,
  inputTokens: 100 * n,
  outputTokens: 10 * n,
  reasoningTokens: n,
  cachedTokens: 2 * n,
  estimated,
  cost,
});

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

    it('find looks a scope’s active session up and never creates one (a turn a gate refuses stores nothing)', async () => {
      const b = await backend();
      const s = b.open();
      await s.prepare('default', 'tg:7');
      expect(s.sessions.find('default', 'tg:7')).toBeUndefined();
      expect(s.sessions.find('default', 'tg:7')).toBeUndefined();
      await s.flush();
      const reader = b.open();
      await reader.prepare('default', 'tg:7');
      expect(reader.sessions.find('default', 'tg:7')).toBeUndefined();
      expect(await reader.sessions.summary('default', 'tg:')).toEqual([]);

      const created = s.sessions.active('default', 'tg:7');
      expect(s.sessions.find('default', 'tg:7')).toEqual(created);
      s.sessions.append(created.id, turn(1));
      await s.flush();
      const again = b.open();
      await again.prepare('default', 'tg:7');
      expect(again.sessions.find('default', 'tg:7')).toMatchObject({ id: created.id, turns: 1 });
      const fresh = again.sessions.start('default', 'tg:7');
      expect(again.sessions.find('default', 'tg:7')?.id).toBe(fresh.id);
    });

    it('a status query of a scope with no session (the management `conversation` action) creates none', async () => {
      const b = await backend();
      const s = b.open();
      const info = { agentName: 'default', agent: () => ({ provider: 'echo' }) as AgentConfig, sessions: s.sessions, conversations: s.conversations };
      const status = conversationStatus({ ...info, defaultQueueMode: () => 'followup' }, 'tg:9', new Set());
      expect(status.Session).toBe('none stored yet');
      expect(s.sessions.find('default', 'tg:9')).toBeUndefined();
      await s.flush();
      const owner = b.open();
      await owner.prepare('default', 'tg:9');
      expect(owner.sessions.find('default', 'tg:9')).toBeUndefined();
      expect(await owner.sessions.summary('default', 'tg:')).toEqual([]);
    });

    it('a turn keeps the items it answered: a later instance finds its row for a re-run of them, which replaces it only when told; a turn appended since hides it', async () => {
      const b = await backend();
      const s = b.open();
      await s.prepare('default', 'tg:5');
      const { id } = s.sessions.active('default', 'tg:5');
      const is = (o: string) => (origin: string) => origin === o;
      s.sessions.append(id, turn(0)); // stored without an origin, as rows from before origins were kept
      s.sessions.append(id, { ...turn(1), origin: 'o1' });
      // The instance that stored it runs no item twice: nothing to find.
      expect(s.sessions.earlierRun(id, () => true)).toBeUndefined();
      await s.flush();

      // A restart (or a takeover) that runs m1 again finds its answer; no other item does.
      const again = b.open();
      await again.prepare('default', 'tg:5');
      expect(again.sessions.active('default', 'tg:5')).toMatchObject({ id, turns: 2 });
      expect(again.sessions.recent(id).map((t) => t.origin ?? null)).toEqual([null, 'o1']);
      expect(again.sessions.earlierRun(id, is('o2'))).toBeUndefined();
      const found = again.sessions.earlierRun(id, is('o1'));
      expect(found).toMatchObject({ userText: 'q1', assistantText: 'a1', ending: 'done', origin: 'o1' });
      expect(found?.rowId).toBe(again.sessions.recent(id).at(-1)!.rowId);
      // m1 answered anew there (its first run had broken off): one row for m1, not two.
      again.sessions.append(id, { ...turn(2), userText: 'q1', origin: 'o1' }, found);
      expect(again.sessions.active('default', 'tg:5').turns).toBe(2);
      expect(again.sessions.recent(id).map((t) => [t.origin ?? null, t.assistantText])).toEqual([
        [null, 'a0'],
        ['o1', 'a2'],
      ]);
      expect(again.sessions.earlierRun(id, () => true)).toBeUndefined();
      again.sessions.append(id, { ...turn(3), origin: 'o3' });
      await again.flush();

      const third = b.open();
      await third.prepare('default', 'tg:5');
      expect(third.sessions.active('default', 'tg:5').turns).toBe(3);
      expect(third.sessions.earlierRun(id, is('o3'))).toMatchObject({ assistantText: 'a3', origin: 'o3' });
      // The same origin again without `replaces` (not a re-run, as session_find decided): both rows stay.
      third.sessions.append(id, { ...turn(4), origin: 'o3' });
      expect(third.sessions.active('default', 'tg:5').turns).toBe(4);
      // A later turn of the session is its newest now: the row read first is no longer found.
      expect(third.sessions.earlierRun(id, () => true)).toBeUndefined();
      await third.flush();

      const fourth = b.open();
      await fourth.prepare('default', 'tg:5');
      expect(fourth.sessions.active('default', 'tg:5').turns).toBe(4);
      expect(fourth.sessions.recent(id).map((t) => [t.origin ?? null, t.assistantText])).toEqual([
        [null, 'a0'],
        ['o1', 'a2'],
        ['o3', 'a3'],
        ['o3', 'a4'],
      ]);
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

    it('usage: totals and the per-(channel, agent, model) breakdown over a filter, from any instance', async () => {
      const b = await backend();
      const s = b.open();
      const t0 = 10 * DAY;
      s.usage.record(use(t0 + 1, 'a', 'tg', 'm1', 1, 0.5));
      s.usage.record(use(t0 + 2, 'a', 'tg', 'm1', 2, 0.25, true));
      s.usage.record(use(t0 + 3, 'a', 'sl', 'm2', 3, null));
      s.usage.record(use(t0 - DAY, 'b', 'tg', 'm1', 4, 1));
      await s.flush();
      const other = b.open();
      expect(await other.usage.totals({})).toEqual({
        turns: 4,
        input_tokens: 1000,
        output_tokens: 100,
        reasoning_tokens: 10,
        cached_tokens: 20,
        estimated_turns: 1,
        cost: 1.75,
      });
      expect(await other.usage.totals({ agent: 'a', sinceMs: t0 })).toMatchObject({ turns: 3, cost: 0.75 });
      expect(await other.usage.totals({ sinceMs: t0, untilMs: t0 + 3 })).toMatchObject({ turns: 2, input_tokens: 300 });
      expect(await other.usage.totals({ scope: 'sl:3' })).toMatchObject({ turns: 1, cost: 0 });
      expect(await other.usage.totals({ model: 'none' })).toEqual({
        turns: 0,
        input_tokens: 0,
        output_tokens: 0,
        reasoning_tokens: 0,
        cached_tokens: 0,
        estimated_turns: 0,
        cost: 0,
      });
      expect(await other.usage.breakdown({ sinceMs: t0 })).toEqual([
        {
          channel: 'sl',
          agent: 'a',
          model: 'm2',
          turns: 1,
          input_tokens: 300,
          output_tokens: 30,
          reasoning_tokens: 3,
          cached_tokens: 6,
          estimated_turns: 0,
          cost: 0,
        },
        {
          channel: 'tg',
          agent: 'a',
          model: 'm1',
          turns: 2,
          input_tokens: 300,
          output_tokens: 30,
          reasoning_tokens: 3,
          cached_tokens: 6,
          estimated_turns: 1,
          cost: 0.75,
        },
      ]);
      // A report includes what this instance recorded a moment ago.
      other.usage.record(use(t0 + 4, 'a', 'tg', 'm1', 5, 2));
      expect(await other.usage.totals({ agent: 'a', sinceMs: t0 })).toMatchObject({ turns: 4, cost: 2.75 });
    });

    it('usage: an agent’s cost today (the daily budget) counts every instance’s turns once learnt before a turn, and this instance’s at once', async () => {
      const b = await backend();
      const today = startOfUtcDay();
      const one = b.open();
      const two = b.open();
      one.usage.record(use(today + 1, 'a', 'tg', 'm', 1, 0.5));
      one.usage.record(use(today - 1, 'a', 'tg', 'm', 2, 9)); // yesterday
      await one.flush();
      await two.prepare('a', 'tg:1', today);
      expect(two.usage.costSince('a', today)).toBeCloseTo(0.5);
      two.usage.record(use(today + 2, 'a', 'tg', 'm', 3, 0.25));
      expect(two.usage.costSince('a', today)).toBeCloseTo(0.75);
      expect(two.usage.costSince('b', today)).toBe(0);
      await two.flush();
      await one.prepare('a', 'tg:1', today);
      expect(one.usage.costSince('a', today)).toBeCloseTo(0.75);
    });

    it('approval decisions survive the instance: another one sees what was asked, decided, started and answered', async () => {
      const b = await backend();
      const s = b.open();
      expect(await s.approvals.get('k1')).toBeUndefined();
      await s.approvals.ask('k1', 'abc', 'tg:1', 'shell');
      await s.approvals.update('k1', 'pending', { promptRef: '{"id":"7"}' });
      const other = b.open();
      expect(await other.approvals.get('k1')).toEqual({
        key: 'k1',
        id: 'abc',
        scope: 'tg:1',
        tool: 'shell',
        state: 'pending',
        decidedBy: null,
        result: null,
        promptRef: '{"id":"7"}',
        offer: null,
      });
      // Asked again (after the instance died): pending, a new id, the old prompt kept to retire it.
      await other.approvals.ask('k1', 'def', 'tg:1', 'shell');
      await other.approvals.update('k1', 'approved', { decidedBy: 'u1' });
      await other.approvals.update('k1', 'running');
      expect(await s.approvals.get('k1')).toMatchObject({ id: 'def', state: 'running', decidedBy: 'u1', promptRef: '{"id":"7"}' });
      await s.approvals.update('k1', 'done', { result: '"ok"' });
      expect(await other.approvals.get('k1')).toMatchObject({ state: 'done', decidedBy: 'u1', result: '"ok"' });
      await s.approvals.ask('k2', 'x', 'tg:2', 'web');
      await s.approvals.update('k2', 'denied', { decidedBy: 'u2' });
      expect(await other.approvals.get('k2')).toMatchObject({ state: 'denied', decidedBy: 'u2', result: null });
    });

    const quota = (over: Partial<SpendQuota> = {}): SpendQuota => ({ key: 'daily:a', windowStartMs: 0, limit: 0.0001, recorded: async () => 0, ...over });

    it('reservations made at once, from several instances, never pass the limit together; settling frees the difference', async () => {
      const b = await backend();
      const instances = [b.open().spend, b.open().spend, b.open().spend];
      const all = await Promise.all(Array.from({ length: 30 }, (_, i) => instances[i % 3]!.reserve(quota(), 0.00003)));
      const granted = all.flatMap((r) => (r.granted ? [r.hold] : []));
      expect(granted).toHaveLength(3);
      const refused = all.find((r) => !r.granted);
      expect(refused && !refused.granted && refused.held).toBeCloseTo(0.00009, 12);
      // Two answers cost less than reserved, one nothing: room for more.
      await granted[0]!.settle(0.00001);
      await granted[1]!.settle(0.00001);
      await granted[2]!.settle(0);
      await granted[2]!.settle(0.5); // settling twice changes nothing
      const again = await Promise.all(Array.from({ length: 10 }, () => instances[1]!.reserve(quota(), 0.00003)));
      expect(again.filter((r) => r.granted)).toHaveLength(2);
    });

    it('a window starts from what was recorded before it was counted; the next window starts empty; keys are separate', async () => {
      const b = await backend();
      const s = b.open().spend;
      const first = await s.reserve(quota({ recorded: async () => 0.00008 }), 0.00002);
      expect(first.granted).toBe(true);
      // Past the limit while another reservation is held: refused.
      expect(await s.reserve(quota(), 0.00001)).toMatchObject({ granted: false });
      // Alone, a reservation may cross the limit while anything is left, never once it is spent.
      if (first.granted) await first.hold.settle(0.000019);
      const alone = await s.reserve(quota(), 0.00005);
      expect(alone.granted).toBe(true);
      if (alone.granted) await alone.hold.settle(0.00005);
      expect(await s.reserve(quota(), 0.000001)).toMatchObject({ granted: false });
      expect((await s.reserve(quota({ windowStartMs: 86_400_000 }), 0.0001)).granted).toBe(true);
      expect((await s.reserve(quota({ key: 'daily:b' }), 0.0001)).granted).toBe(true);
    });

    it('a window as it stands (settled and held) is seen by every instance; the top windows of a prefix come most used first', async () => {
      const b = await backend();
      const [s, other] = [b.open().spend, b.open().spend];
      expect(await other.peek('quota:user_turns:web_1:u1', 0)).toBeUndefined();
      const q = (key: string) => quota({ key, limit: 10 });
      const one = await s.reserve(q('quota:user_turns:web_1:u1'), 1);
      if (one.granted) await one.hold.settle(1);
      await s.reserve(q('quota:user_turns:web_1:u1'), 1); // still held
      const two = await s.reserve(q('quota:user_turns:web_1:u2'), 1);
      if (two.granted) await two.hold.settle(1);
      // "_" is no wildcard: a channel "webx1" is not "web_1".
      await s.reserve(q('quota:user_turns:webx1:u3'), 3);
      await s.reserve(quota({ key: 'quota:user_turns:web_1:u4', windowStartMs: 3_600_000, limit: 10 }), 5);
      expect(await other.peek('quota:user_turns:web_1:u1', 0)).toEqual({ key: 'quota:user_turns:web_1:u1', settled: 1, held: 1 });
      expect(await other.top('quota:user_turns:web_1:', 0, 10)).toEqual([
        { key: 'quota:user_turns:web_1:u1', settled: 1, held: 1 },
        { key: 'quota:user_turns:web_1:u2', settled: 1, held: 0 },
      ]);
      expect(await other.top('quota:user_turns:web_1:', 0, 1)).toHaveLength(1);
    });

    it("a window's settled count outlives the process: a sender's turns this hour still count after a restart", async () => {
      const b = await backend();
      const s = b.open();
      // This hour: a store may forget windows that ended days ago.
      const hour = Math.floor(Date.now() / 3_600_000) * 3_600_000;
      const turns = quota({ key: 'quota:user_turns:web:u1', windowStartMs: hour, limit: 2 });
      for (let i = 0; i < 2; i++) {
        const r = await s.spend.reserve(turns, 1);
        if (r.granted) await r.hold.settle(1);
      }
      await s.flush();
      const again = b.restarted();
      expect(await again.peek('quota:user_turns:web:u1', hour)).toEqual({ key: 'quota:user_turns:web:u1', settled: 2, held: 0 });
      expect(await again.top('quota:user_turns:web:', hour, 10)).toEqual([{ key: 'quota:user_turns:web:u1', settled: 2, held: 0 }]);
      expect(await again.reserve(turns, 1)).toEqual({ granted: false, settled: 2, held: 0 });
      // Another sender, and the next hour, start empty.
      expect((await again.reserve({ ...turns, key: 'quota:user_turns:web:u2' }, 1)).granted).toBe(true);
      expect((await again.reserve({ ...turns, windowStartMs: hour + 3_600_000 }, 1)).granted).toBe(true);
    });

    it('a decision left on a pending question is seen by another instance, only under its current id, and cleared when asked again', async () => {
      const b = await backend();
      const s = b.open();
      const other = b.open();
      await s.approvals.ask('k3', 'aaa111', 'tg:3', 'shell');
      expect((await other.approvals.pending('aaa111')).map((r) => r.key)).toEqual(['k3']);
      expect(await other.approvals.offer('k3', 'bbb222', { verdict: 'approve', by: 'u3' })).toBe(false);
      expect(await other.approvals.offer('k3', 'aaa111', { verdict: 'approve', by: 'u3' })).toBe(true);
      expect(JSON.parse((await s.approvals.get('k3'))!.offer!)).toEqual({ verdict: 'approve', by: 'u3' });
      await s.approvals.ask('k3', 'ccc333', 'tg:3', 'shell');
      expect(await other.approvals.get('k3')).toMatchObject({ id: 'ccc333', offer: null });
      expect(await other.approvals.pending('aaa111')).toEqual([]);
      await s.approvals.update('k3', 'denied');
      expect(await other.approvals.offer('k3', 'ccc333', { verdict: 'approve', by: 'u3' })).toBe(false);
    });
  });
}

contract('SQLite', async () => {
  const db = openDb(':memory:');
  const group = new GroupCommit(db);
  // One process runs every turn on one node: each "instance" shares its reservations.
  const spend = new LocalReservations(new SqliteSettledWindows(db, group));
  return {
    restarted: () => new LocalReservations(new SqliteSettledWindows(db, group)),
    open: () => ({
      sessions: new SessionStore(db, group),
      conversations: new ConversationStore(db),
      usage: new SqliteUsageLedger(db, group),
      approvals: new ApprovalStore(db),
      spend,
      prepare: async () => {},
      flush: async () => group.flush(),
    }),
  };
});

const skip = await clusterSkipReason();
const pgPool = migratedPools();
if (skip === undefined) {
  contract('PostgreSQL', async () => {
    // Each test in its own schema.
    const pool = await pgPool(4);
    const { log } = quietLogger();
    return {
      restarted: () => new PgReservations(new PgWriter(pool, log), log),
      open: () => {
        const w = new PgWriter(pool, log);
        const sessions = new PgSessionStore(w);
        const conversations = new PgConversationStore(w);
        const usage = new PgUsageLedger(w);
        return {
          sessions,
          conversations,
          usage,
          approvals: new PgApprovalStore(w),
          spend: new PgReservations(w, log),
          // As the cluster topology (src/topology/cluster/cluster-topology.ts) does before each turn.
          prepare: async (agent, scope, budgetSinceMs) => {
            await sessions.prepare(agent, scope);
            await conversations.prepare(agent, scope);
            if (budgetSinceMs !== undefined) await usage.refresh(agent, budgetSinceMs);
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
