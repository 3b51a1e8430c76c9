import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ChannelMessage } from '../../../src/contracts/message.js';
import { registerBuiltinHooks } from '../../../src/runtime/builtin-hooks.js';
import { openDb, SCHEMA_VERSION, type Db } from '../../../src/store/db.js';
import { SessionStore } from '../../../src/store/sessions.js';
import { FakeLlm, type Script } from '../../fakes/llm/server.js';
import { waitFor } from '../../helpers/daemon.js';
import { pipeline } from '../../helpers/pipeline.js';
import { RecordingAdapter, userMessage } from '../../helpers/recording-adapter.js';
import { bareRuntime, request, ScriptedRunner, sink } from '../../helpers/runtime.js';

// A message whose turn is run again from the start (the process stopped or was killed after
// its answer was stored, before the reply went out): the stored answer goes out again, the
// model is not asked twice, and the session keeps one row per message.

let llm: FakeLlm;
let dir: string;
const dbs: Db[] = [];
beforeEach(async () => {
  // One fake per test: a script left unused by one test never answers another.
  llm = new FakeLlm();
  await llm.start();
  dir = mkdtempSync(join(tmpdir(), 'channeld-rerun-'));
});
afterEach(async () => {
  for (const db of dbs.splice(0)) if (db.open) db.close();
  rmSync(dir, { recursive: true, force: true });
  await llm.close();
});

const answer = (text: string): Script => ({ kind: 'stream', chunks: [{ content: text }] });
const agent = () => `[agent]\nprovider = "openai-compatible"\nmodel = "tides"\nbase_url = "${llm.url}"\n`;
const chat = { id: 'c', type: 'dm' as const };

/** The state file as a process opens it: the same file each start. */
function open(): Db {
  const db = openDb(join(dir, 'channeld.db'));
  dbs.push(db);
  return db;
}

const rows = (db: Db) => db.prepare('SELECT user_text, assistant_text, ending FROM turns ORDER BY id').all();
const states = (db: Db) => (db.prepare('SELECT state FROM inbox ORDER BY id').all() as Array<{ state: string }>).map((r) => r.state);

/**
 * A first process that takes `msg` and runs its turn until `ready`, while the platform takes
 * no reply request matching `held`; then it stops. Its final reply is cut by the hard stop, so
 * the item is left for the next start, as a kill -9 would leave it.
 */
async function firstRun(
  adapter: RecordingAdapter,
  msg: ChannelMessage,
  ready: (db: Db) => boolean,
  held: Parameters<RecordingAdapter['hold']>[0],
): Promise<void> {
  const db = open();
  const p = pipeline(agent(), '', { db, adapter });
  const hold = adapter.hold(held);
  await p.dispatcher.deliver(msg);
  await waitFor(() => ready(db));
  await p.close(50);
  expect(states(db)).toEqual([expect.stringMatching(/^(pending|running)$/)]);
  db.close();
  // The next process's requests go through: the platform is back.
  hold.release();
}

/** The next start on the same file: the item is recovered and run again, to its end. */
async function nextStart(adapter: RecordingAdapter): Promise<Db> {
  const db = open();
  const p = pipeline(agent(), '', { db, adapter });
  expect(p.dispatcher.recover()).toBe(1);
  await waitFor(() => states(db).every((s) => s === 'done'));
  await p.close();
  return db;
}

describe('a message run again after its turn was stored', () => {
  it('whose answer was complete: the stored answer is sent, the model is asked once, the session has one row', async () => {
    const adapter = new RecordingAdapter('t');
    const msg = userMessage('t', 'when is high water?', { chat });
    llm.script(answer('High water is at six.'), answer('High water is at seven.'));
    // The answer is stored while the reply's first message is still on its way: the process stops then.
    await firstRun(
      adapter,
      msg,
      (db) => rows(db).length === 1,
      (c) => c.chatId === 'c' && (c.op === 'send' || c.op === 'edit'),
    );
    expect(llm.requests).toHaveLength(1);
    expect(adapter.visible('c')).toEqual([]);

    const db = await nextStart(adapter);
    expect(llm.requests).toHaveLength(1);
    expect(adapter.visible('c')).toEqual(['High water is at six.']);
    expect(rows(db)).toEqual([{ user_text: 'when is high water?', assistant_text: 'High water is at six.', ending: 'done' }]);
  });

  it('whose answer broke off (cancelled by the stop): the model is asked again without the broken-off answer, and its answer replaces that row', async () => {
    const adapter = new RecordingAdapter('t');
    const msg = userMessage('t', 'when is high water?', { chat });
    // The model stops writing half-way; its draft is shown, and the stop's final edit never lands.
    llm.script({ kind: 'stall', chunks: [{ content: 'High water' }] }, answer('High water is at six.'));
    await firstRun(
      adapter,
      msg,
      () => adapter.visible('c').length === 1,
      (c) => c.chatId === 'c' && c.op === 'edit',
    );
    expect(rows(open())).toEqual([{ user_text: 'when is high water?', assistant_text: 'High water', ending: 'cancelled' }]);

    const db = await nextStart(adapter);
    expect(llm.requests).toHaveLength(2);
    // The re-run asks as the first run did: no earlier exchange for the same message.
    expect(llm.requests[1]!.body.messages.filter((m) => m.role !== 'system')).toEqual([{ role: 'user', content: 'when is high water?' }]);
    expect(rows(db)).toEqual([{ user_text: 'when is high water?', assistant_text: 'High water is at six.', ending: 'done' }]);
    // The draft the first run showed now holds the answer.
    expect(adapter.visible('c')).toEqual(['High water is at six.']);
  });
});

describe('session_load and a stored answer', () => {
  /** A runtime with the built-in hooks over a session store on `db`, as a process started on it has. */
  function started(db: Db, answer: string, needsHistory = true) {
    const runner = new ScriptedRunner([
      { type: 'text_delta', text: answer },
      { type: 'done', usage: { inputTokens: 1, outputTokens: 1, estimated: true } },
    ]);
    const { runtime } = bareRuntime(runner);
    registerBuiltinHooks(runtime, { agentName: 'a', sessions: new SessionStore(db), historyBudgetChars: () => 10_000, needsHistory: () => needsHistory });
    return { runtime, runner };
  }

  it('an agent that reads no history (echo) gets the stored answer too; a message received after the row (an id used again) is asked', async () => {
    const db = openDb(':memory:');
    dbs.push(db);
    const msg = userMessage('t', 'hello');
    const first = started(db, 'hello back', false);
    await first.runtime.run(request('hello', sink(), { message: msg }));
    expect(first.runner.inputs).toHaveLength(1);

    // The next start runs it again.
    const again = started(db, 'asked again', false);
    const replayed = sink();
    const outcome = await again.runtime.run(request('hello', replayed, { message: msg }));
    expect(outcome).toMatchObject({ ending: 'done', text: 'hello back' });
    expect(replayed.text()).toBe('hello back');
    expect(again.runner.inputs).toHaveLength(0);
    expect(rows(db)).toEqual([{ user_text: 'hello', assistant_text: 'hello back', ending: 'done' }]);

    // The same channel and id on a message that came after the row was stored: a new message.
    const later = started(db, 'a new answer');
    await later.runtime.run(request('hello', sink(), { message: { ...msg, receivedAt: Date.now() + 60_000 } }));
    expect(later.runner.inputs).toHaveLength(1);
  });
});

describe("turns' origins in a state file from before", () => {
  it('the column is added where it is missing, without a new schema version (an older build still opens the file); old rows have none', () => {
    const before = open();
    const { id } = new SessionStore(before).active('a', 't:1');
    // The file as an older build left it: no origin column, a turn stored without one.
    before.exec('ALTER TABLE turns DROP COLUMN origin');
    before.prepare(`INSERT INTO turns (session_id, user_text, assistant_text, ending, created_at) VALUES (?, 'q', 'a', 'done', ?)`).run(id, Date.now());
    before.close();

    const db = open();
    expect(db.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    const sessions = new SessionStore(db);
    expect(sessions.active('a', 't:1')).toMatchObject({ id, turns: 1 });
    expect(sessions.recent(id).map((t) => [t.assistantText, t.origin])).toEqual([['a', null]]);
    sessions.append(id, { userText: 'q2', assistantText: 'a2', reasoning: '', toolCalls: [], ending: 'done', model: null, origin: '["t","m2"]' });
    expect(sessions.recent(id).map((t) => t.origin)).toEqual([null, '["t","m2"]']);
  });
});
