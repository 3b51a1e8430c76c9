import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CodedError } from '../../../src/contracts/errors.js';
import type { MessageRef } from '../../../src/contracts/message.js';
import { TRANSITIONS, type InboxItem, type ItemEvent, type ItemState } from '../../../src/inbox/item.js';
import { ItemLifecycle, LocalIntake, type LifecycleObserver } from '../../../src/inbox/lifecycle.js';
import { openDb, type Db } from '../../../src/store/db.js';
import { GroupCommit } from '../../../src/store/group-commit.js';
import { Inbox } from '../../../src/store/inbox.js';
import { userMessage } from '../../helpers/recording-adapter.js';

const dirs: string[] = [];
const dbs: Db[] = [];
afterEach(() => {
  for (const db of dbs.splice(0)) if (db.open) db.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A state database on disk, so a "restart" can open it again. */
function dbFile(): string {
  const d = mkdtempSync(join(tmpdir(), 'channeld-lifecycle-'));
  dirs.push(d);
  return join(d, 'channeld.db');
}

function open(file: string): Db {
  const db = openDb(file);
  dbs.push(db);
  return db;
}

/** Every observer call, as `event:ids`. */
function recorder(): { events: string[]; observer: LifecycleObserver } {
  const events: string[] = [];
  const ids = (items: readonly InboxItem[]) => items.map((i) => i.id).join(',');
  return {
    events,
    observer: {
      queued: (it) => events.push(`queued:${it.id}`),
      refused: (it, why) => events.push(`refused:${it.id}:${why}`),
      started: (items) => events.push(`started:${ids(items)}`),
      finished: (items, state) => events.push(`finished:${ids(items)}:${state}`),
      dropped: (items, why) => events.push(`dropped:${ids(items)}:${why}`),
      released: (items) => events.push(`released:${ids(items)}`),
    },
  };
}

function row(db: Db, id: number): { state: string; error: string | null; reply_refs: string } {
  return db.prepare('SELECT state, error, reply_refs FROM inbox WHERE id = ?').get(id) as { state: string; error: string | null; reply_refs: string };
}

const ref: MessageRef = { chatId: 'chat-1', messageId: 'out-1' };

function setup(db = open(':memory:')) {
  const inbox = new Inbox(db);
  const rec = recorder();
  const lifecycle = new ItemLifecycle(inbox, [rec.observer]);
  const intake = new LocalIntake(inbox);
  let n = 0;
  const receive = async (text = `m${++n}`) => (await intake.receive(userMessage('t', text, { messageId: `in-${text}` }), 't:chat-1'))!;
  return { db, inbox, lifecycle, intake, events: rec.events, receive };
}

type Setup = ReturnType<typeof setup>;

/** Brings a fresh item to `state` by legal moves only. */
async function itemIn(s: Setup, state: ItemState): Promise<InboxItem> {
  const it = await s.receive();
  if (state === 'pending') return it;
  if (state === 'refused') {
    s.lifecycle.refused(it, 'queue full');
    return it;
  }
  s.lifecycle.queued(it);
  if (state === 'queued') return it;
  if (state === 'failed') {
    s.lifecycle.dropped([it], 'stopped by /stop');
    return it;
  }
  s.lifecycle.started([it]);
  if (state === 'done') s.lifecycle.finished([it], 'done');
  return it;
}

/** Each lifecycle call, the event it is, and the state it leads to. */
const operations: Record<string, { event: ItemEvent; to: ItemState; run(l: ItemLifecycle, it: InboxItem): void }> = {
  queued: { event: 'queue', to: 'queued', run: (l, it) => l.queued(it) },
  refused: { event: 'refuse', to: 'refused', run: (l, it) => l.refused(it, 'queue full') },
  started: { event: 'start', to: 'running', run: (l, it) => l.started([it]) },
  replied: { event: 'reply', to: 'running', run: (l, it) => l.replied([it], [ref]) },
  finished: { event: 'finish', to: 'done', run: (l, it) => l.finished([it], 'done') },
  failed: { event: 'finish', to: 'failed', run: (l, it) => l.finished([it], 'error') },
  dropped: { event: 'drop', to: 'failed', run: (l, it) => l.dropped([it], 'stopped') },
  released: { event: 'release', to: 'pending', run: (l, it) => l.released([it]) },
  interrupted: { event: 'interrupt', to: 'pending', run: (l, it) => l.interrupted([it]) },
};

const legalFrom = (op: string, from: ItemState) => TRANSITIONS[operations[op]!.event].from.includes(from);

const states: ItemState[] = ['pending', 'queued', 'running', 'done', 'failed', 'refused'];

describe('the inbox item lifecycle', () => {
  it('stores a new message as pending and knows a redelivery', async () => {
    const s = setup();
    const msg = userMessage('t', 'hello', { messageId: 'in-1' });
    const it = await s.intake.receive(msg, 't:chat-1');
    expect(it).toMatchObject({ scope: 't:chat-1', state: 'pending', replyRefs: [], message: msg });
    expect(row(s.db, it!.id).state).toBe('pending');
    expect(await s.intake.receive(msg, 't:chat-1')).toBeUndefined();
  });

  it('a turn: queued, started (row still pending), replied (row running with refs), finished done', async () => {
    const s = setup();
    const it = await s.receive();
    s.lifecycle.queued(it);
    s.lifecycle.started([it]);
    expect(it.state).toBe('running');
    // Nothing is written when a turn starts: the first reply marks the row running.
    expect(row(s.db, it.id).state).toBe('pending');
    s.lifecycle.replied([it], [ref]);
    expect(row(s.db, it.id)).toEqual({ state: 'running', error: null, reply_refs: JSON.stringify([ref]) });
    s.lifecycle.finished([it], 'done');
    expect(it.state).toBe('done');
    expect(row(s.db, it.id)).toMatchObject({ state: 'done', error: null });
    expect(s.events).toEqual([`queued:${it.id}`, `started:${it.id}`, `finished:${it.id}:done`]);
  });

  it('a turn interrupted (the process stops before its final text went out) writes nothing: the row stays running with its refs', async () => {
    const s = setup();
    const it = await s.receive();
    s.lifecycle.queued(it);
    s.lifecycle.started([it]);
    s.lifecycle.replied([it], [ref]);
    s.lifecycle.interrupted([it]);
    expect(it.state).toBe('pending');
    expect(row(s.db, it.id)).toEqual({ state: 'running', error: null, reply_refs: JSON.stringify([ref]) });
  });

  for (const [ending, error] of [
    ['error', 'error'],
    ['cancelled', 'cancelled'],
  ] as const) {
    it(`a turn that ends ${ending} leaves its items failed with why`, async () => {
      const s = setup();
      const it = await itemIn(s, 'running');
      s.lifecycle.finished([it], ending);
      expect(it.state).toBe('failed');
      expect(row(s.db, it.id)).toMatchObject({ state: 'failed', error });
      expect(s.events.at(-1)).toBe(`finished:${it.id}:failed`);
    });
  }

  it('a turn that threw records the error it threw', async () => {
    const s = setup();
    const it = await itemIn(s, 'running');
    s.lifecycle.finished([it], 'error', 'Error: boom');
    expect(row(s.db, it.id)).toMatchObject({ state: 'failed', error: 'Error: boom' });
  });

  it('collected items run as one turn: all move together, the first names it', async () => {
    const s = setup();
    const a = await itemIn(s, 'queued');
    const b = await itemIn(s, 'queued');
    s.lifecycle.started([a, b]);
    s.lifecycle.replied([a, b], [ref]);
    s.lifecycle.finished([a, b], 'done');
    expect([row(s.db, a.id).state, row(s.db, b.id).state]).toEqual(['done', 'done']);
    expect(JSON.parse(row(s.db, b.id).reply_refs)).toEqual([ref]);
    expect(s.events.slice(-2)).toEqual([`started:${a.id},${b.id}`, `finished:${a.id},${b.id}:done`]);
  });

  it('a full queue refuses a pending item, with why', async () => {
    const s = setup();
    const it = await s.receive();
    s.lifecycle.refused(it, 'queue full');
    expect(row(s.db, it.id)).toMatchObject({ state: 'refused', error: 'queue full' });
    expect(s.events).toEqual([`refused:${it.id}:queue full`]);
  });

  it('a dropped queued item fails with why; a released one goes back to pending and nothing is written', async () => {
    const s = setup();
    const gone = await itemIn(s, 'queued');
    const handed = await itemIn(s, 'queued');
    s.lifecycle.dropped([gone], 'superseded by a newer message');
    s.lifecycle.released([handed]);
    expect(row(s.db, gone.id)).toMatchObject({ state: 'failed', error: 'superseded by a newer message' });
    expect(handed.state).toBe('pending');
    expect(row(s.db, handed.id).state).toBe('pending');
    expect(s.events.slice(-2)).toEqual([`dropped:${gone.id}:superseded by a newer message`, `released:${handed.id}`]);
    // Handed back later (the partition returns), it can be queued again.
    s.lifecycle.queued(handed);
    expect(handed.state).toBe('queued');
  });

  it('empty batches are no moves and tell nobody', async () => {
    const s = setup();
    s.lifecycle.dropped([], 'x');
    s.lifecycle.released([]);
    expect(s.events).toEqual([]);
  });

  it('the transition table: what each state allows, and final states allow nothing', () => {
    for (const { from, to } of Object.values(TRANSITIONS)) {
      for (const final of ['done', 'failed', 'refused'] as const) expect(from).not.toContain(final);
      expect(to.length).toBeGreaterThan(0);
    }
    const reachable = Object.fromEntries(
      states.map((from) => [
        from,
        Object.keys(operations)
          .filter((op) => legalFrom(op, from))
          .sort(),
      ]),
    );
    expect(reachable).toEqual({
      pending: ['queued', 'refused'],
      queued: ['dropped', 'released', 'started'],
      running: ['failed', 'finished', 'interrupted', 'replied'],
      done: [],
      failed: [],
      refused: [],
    });
  });

  describe('refuses an illegal move with INBOX_ILLEGAL_TRANSITION and changes nothing', () => {
    for (const from of states) {
      for (const op of Object.keys(operations).filter((o) => !legalFrom(o, from))) {
        it(`${op} from ${from}`, async () => {
          const s = setup();
          const it = await itemIn(s, from);
          const before = row(s.db, it.id);
          const events = s.events.length;
          let thrown: unknown;
          try {
            operations[op]!.run(s.lifecycle, it);
          } catch (err) {
            thrown = err;
          }
          expect(thrown).toBeInstanceOf(CodedError);
          expect((thrown as CodedError).code).toBe('INBOX_ILLEGAL_TRANSITION');
          expect((thrown as CodedError).message).toContain(`inbox item ${it.id} cannot ${operations[op]!.event} (${from} → ${operations[op]!.to})`);
          expect(it.state).toBe(from);
          expect(row(s.db, it.id)).toEqual(before);
          expect(s.events).toHaveLength(events);
        });
      }
    }
  });

  it('a batch with one illegal item moves none of them', async () => {
    const s = setup();
    const ok = await itemIn(s, 'queued');
    const done = await itemIn(s, 'done');
    expect(() => s.lifecycle.dropped([ok, done], 'stopped')).toThrow(CodedError);
    expect(ok.state).toBe('queued');
    expect(row(s.db, ok.id).state).toBe('pending');
  });

  it('control commands are stored as done; a redelivery is recognised both ways', async () => {
    const s = setup();
    const stop = userMessage('t', '/stop', { messageId: 'c-1' });
    expect(await s.intake.recordCommand(stop, 't:chat-1', false)).toBe(true);
    expect(await s.intake.recordCommand(stop, 't:chat-1', false)).toBe(false);
    const approve = userMessage('t', '/approve', { messageId: 'c-2' });
    expect(await s.intake.recordCommand(approve, 't:chat-1', true)).toBe(true);
    expect(await s.intake.recordCommand(approve, 't:chat-1', true)).toBe(false);
    expect(s.db.prepare(`SELECT state FROM inbox`).all()).toEqual([{ state: 'done' }, { state: 'done' }]);
    expect(s.intake.recover()).toEqual([]);
  });
});

describe('restart recovery from each persisted state', () => {
  it('picks up pending and running rows (with their draft) as pending, in order; final ones stay finished', async () => {
    const file = dbFile();
    const first = setup(open(file));
    const pending = await itemIn(first, 'pending');
    const queued = await itemIn(first, 'queued');
    const startedNoReply = await itemIn(first, 'running');
    const running = await itemIn(first, 'running');
    first.lifecycle.replied([running], [ref]);
    const done = await itemIn(first, 'done');
    const failed = await itemIn(first, 'failed');
    const refused = await itemIn(first, 'refused');
    const ended = await itemIn(first, 'running');
    first.lifecycle.finished([ended], 'cancelled');
    await first.intake.recordCommand(userMessage('t', '/stop', { messageId: 'c-1' }), 't:chat-1', true);
    const persisted = (first.db.prepare('SELECT id, state FROM inbox ORDER BY id').all() as { id: number; state: string }[]).map((r) => r.state);
    expect(persisted).toEqual(['pending', 'pending', 'pending', 'running', 'done', 'failed', 'refused', 'failed', 'done']);
    // kill -9: the process is gone; only the database file remains.
    first.db.close();

    const second = setup(open(file));
    const recovered = second.intake.recover();
    expect(recovered.map((i) => i.id)).toEqual([pending.id, queued.id, startedNoReply.id, running.id]);
    expect(recovered.every((i) => i.state === 'pending')).toBe(true);
    expect(recovered.find((i) => i.id === running.id)!.replyRefs).toEqual([ref]);
    expect(recovered.find((i) => i.id === pending.id)!.message.text).toBe(pending.message.text);
    for (const id of [done.id, failed.id, refused.id, ended.id]) expect(recovered.some((i) => i.id === id)).toBe(false);

    // Each recovered item runs its lifecycle again from pending; the running one continues its draft.
    for (const it of recovered) {
      second.lifecycle.queued(it);
      second.lifecycle.started([it]);
      second.lifecycle.replied([it], it.replyRefs.length ? it.replyRefs : [ref]);
      second.lifecycle.finished([it], 'done');
    }
    second.db.close();
    const third = setup(open(file));
    expect(third.intake.recover()).toEqual([]);
  });

  it('with the group commit, final states written in the last tick before a kill leave the item to run again', async () => {
    const file = dbFile();
    const db = open(file);
    const group = new GroupCommit(db);
    const inbox = new Inbox(db, group);
    const lifecycle = new ItemLifecycle(inbox);
    const intake = new LocalIntake(inbox);
    const it = (await intake.receive(userMessage('t', 'hi', { messageId: 'in-1' }), 't:chat-1'))!;
    lifecycle.queued(it);
    lifecycle.started([it]);
    lifecycle.replied([it], [ref]);
    lifecycle.finished([it], 'done');
    // The refs and the final state wait for the next tick's commit; the process dies first.
    db.close();
    const again = new LocalIntake(new Inbox(open(file))).recover();
    expect(again.map((i) => [i.id, i.state, i.replyRefs])).toEqual([[it.id, 'pending', []]]);
  });
});
