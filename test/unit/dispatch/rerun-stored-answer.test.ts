import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ChannelMessage } from '../../../src/contracts/message.js';
import type { Transcriber } from '../../../src/media/transcriber.js';
import { answering, registerBuiltinHooks } from '../../../src/runtime/builtin-hooks.js';
import { openDb, SCHEMA_VERSION, type Db } from '../../../src/store/db.js';
import { SessionStore } from '../../../src/store/sessions.js';
import { SqliteUsageLedger } from '../../../src/store/usage-ledger.js';
import { startOfUtcDay } from '../../../src/store/usage-ledger.js';
import { registerAttachments } from '../../../src/workspace/attachments.js';
import type { WorkspaceOptions } from '../../../src/workspace/workspace.js';
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

/** What a process is started with besides the agent: config lines for it, and workspace parts over its state file. */
interface Setup {
  agentToml?: string;
  workspace?: (db: Db) => Partial<WorkspaceOptions>;
}
const startProcess = (db: Db, adapter: RecordingAdapter, setup: Setup = {}) =>
  pipeline(agent() + (setup.agentToml ?? ''), '', { db, adapter, ...(setup.workspace ? { workspace: setup.workspace(db) } : {}) });

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
  setup?: Setup,
): Promise<void> {
  const db = open();
  const p = startProcess(db, adapter, setup);
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
async function nextStart(adapter: RecordingAdapter, setup?: Setup): Promise<Db> {
  const db = open();
  const p = startProcess(db, adapter, setup);
  expect(p.dispatcher.recover()).toBe(1);
  await waitFor(() => states(db).every((s) => s === 'done'));
  await p.close();
  return db;
}

/**
 * m0 runs (its reply, "Hello…", held on its way), and m1 and m2 arrive meanwhile: in collect
 * mode they are collected into the next turn. Resolves with m0's held reply, to release.
 */
async function collectedWhileFirstRuns(p: ReturnType<typeof pipeline>, adapter: RecordingAdapter, [m0, m1, m2]: ChannelMessage[]) {
  const m0Reply = adapter.hold((c) => c.text?.startsWith('Hello') === true);
  await p.dispatcher.deliver(m0!);
  await m0Reply.reached;
  await p.dispatcher.deliver(m1!);
  await p.dispatcher.deliver(m2!);
  return m0Reply;
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

  it('whose answer was complete and spent the daily budget: the stored answer is sent, not the notice that the budget is spent', async () => {
    const adapter = new RecordingAdapter('t');
    const msg = userMessage('t', 'when is high water?', { chat });
    llm.script(answer('High water is at six.'), answer('High water is at seven.'));
    // A priced model: the first run's answer is recorded with its cost.
    const priced: Setup = {
      workspace: (db) => ({
        usage: { ledger: new SqliteUsageLedger(db) },
        models: () => ({ tides: { input: ['text'], price_in_per_mtok: 10_000, price_out_per_mtok: 10_000 } }),
      }),
    };
    const spent = (db: Db) => new SqliteUsageLedger(db).costSince('default', startOfUtcDay());
    await firstRun(
      adapter,
      msg,
      (db) => rows(db).length === 1 && spent(db) > 0,
      (c) => c.chatId === 'c' && (c.op === 'send' || c.op === 'edit'),
      priced,
    );
    const cost = spent(open());
    expect(cost).toBeGreaterThan(0);

    // The next start has a daily budget of exactly that answer: it is spent.
    const db = await nextStart(adapter, { ...priced, agentToml: `daily_budget = ${cost}\n` });
    expect(llm.requests).toHaveLength(1);
    expect(adapter.visible('c')).toEqual(['High water is at six.']);
    expect(rows(db)).toEqual([{ user_text: 'when is high water?', assistant_text: 'High water is at six.', ending: 'done' }]);
    // Giving the stored answer again cost nothing more.
    expect(spent(db)).toBe(cost);
  });

  it('whose answer was for messages collected into one turn, run again: the batch gets the stored answer in the same reply, the model is not asked, one row', async () => {
    const adapter = new RecordingAdapter('t');
    const [m0, m1, m2] = ['hello', 'when is high water?', 'and low water?'].map((t) => userMessage('t', t, { chat }));
    let showRest!: () => void;
    const rest = new Promise<void>((r) => (showRest = r));
    llm.script(
      answer('Hello.'),
      // m1 and m2's answer: its first words are shown (the reply's message is sent), then the rest.
      { kind: 'stream', chunks: [{ content: 'High water at six' }, { content: ', low water at noon.', after: rest }] },
      answer('asked again'),
    );
    const first = open();
    const p = pipeline(agent(), 'queue_mode = "collect"', { db: first, adapter });
    const m0Reply = await collectedWhileFirstRuns(p, adapter, [m0!, m1!, m2!]);
    const finalEdit = adapter.hold((c) => c.op === 'edit' && c.text?.includes('low water') === true);
    m0Reply.release();
    await waitFor(() => adapter.visible('c').includes('High water at six'));
    showRest();
    // Their answer is stored; the process stops while its final edit is on its way.
    await finalEdit.reached;
    await waitFor(() => rows(first).length === 2);
    await p.close(50);
    expect(states(first)).toEqual(['done', 'running', 'running']);
    first.close();
    finalEdit.release();
    expect(llm.requests).toHaveLength(2);
    expect(llm.requests[1]!.body.messages.at(-1)).toEqual({ role: 'user', content: 'when is high water?\n\nand low water?' });

    // The next start runs m1 and m2 again as one turn, as they ran (their items share the reply).
    const db = open();
    const again = pipeline(agent(), 'queue_mode = "collect"', { db, adapter });
    expect(again.dispatcher.recover()).toBe(2);
    await waitFor(() => states(db).every((s) => s === 'done'));
    await again.close();
    expect(llm.requests).toHaveLength(2);
    expect(rows(db)).toEqual([
      { user_text: 'hello', assistant_text: 'Hello.', ending: 'done' },
      { user_text: 'when is high water?\n\nand low water?', assistant_text: 'High water at six, low water at noon.', ending: 'done' },
    ]);
    // It edits the message the first run had sent: no second message.
    expect(adapter.visible('c')).toEqual(['Hello.', 'High water at six, low water at noon.']);
    expect(adapter.calls.filter((c) => c.op === 'send')).toHaveLength(2);
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

  it('whose answer, for messages collected into one turn, broke off (cancelled by the stop): the batch runs again as one turn, the model is asked once for both, one row', async () => {
    const adapter = new RecordingAdapter('t');
    const [m0, m1, m2] = ['hello', 'when is high water?', 'and low water?'].map((t) => userMessage('t', t, { chat }));
    llm.script(
      answer('Hello.'),
      // m1 and m2's answer stops half-way; its draft is shown, and the stop's final edit never lands.
      { kind: 'stall', chunks: [{ content: 'High water' }] },
      answer('High water at six, low water at noon.'),
      answer('asked again'),
    );
    const first = open();
    const p = pipeline(agent(), 'queue_mode = "collect"', { db: first, adapter });
    const m0Reply = await collectedWhileFirstRuns(p, adapter, [m0!, m1!, m2!]);
    m0Reply.release();
    await waitFor(() => adapter.visible('c').includes('High water'));
    const stopEdit = adapter.hold((c) => c.op === 'edit');
    await p.close(50);
    expect(states(first)).toEqual(['done', 'running', 'running']);
    expect(rows(first)).toEqual([
      { user_text: 'hello', assistant_text: 'Hello.', ending: 'done' },
      { user_text: 'when is high water?\n\nand low water?', assistant_text: 'High water', ending: 'cancelled' },
    ]);
    first.close();
    stopEdit.release();
    expect(llm.requests).toHaveLength(2);

    // The next start: before, m1 ran alone and then m2, each asking the model and each
    // editing the same reply, so it showed only m2's answer.
    const db = open();
    const again = pipeline(agent(), 'queue_mode = "collect"', { db, adapter });
    expect(again.dispatcher.recover()).toBe(2);
    await waitFor(() => states(db).every((s) => s === 'done'));
    await again.close();
    expect(llm.requests).toHaveLength(3);
    expect(llm.requests[2]!.body.messages.at(-1)).toEqual({ role: 'user', content: 'when is high water?\n\nand low water?' });
    expect(adapter.visible('c')).toEqual(['Hello.', 'High water at six, low water at noon.']);
    expect(rows(db)).toEqual([
      { user_text: 'hello', assistant_text: 'Hello.', ending: 'done' },
      { user_text: 'when is high water?\n\nand low water?', assistant_text: 'High water at six, low water at noon.', ending: 'done' },
    ]);
  });
});

describe('the session hooks and a stored answer', () => {
  /**
   * A runtime with the built-in hooks over a session store on `db`, as a process started on it
   * has, and the attachments hook, which hears voice messages with `transcriber` when given.
   */
  function started(db: Db, answer: string, needsHistory = true, transcriber?: Transcriber) {
    const runner = new ScriptedRunner([
      { type: 'text_delta', text: answer },
      { type: 'done', usage: { inputTokens: 1, outputTokens: 1, estimated: true } },
    ]);
    const { runtime } = bareRuntime(runner);
    registerBuiltinHooks(runtime, { agentName: 'a', sessions: new SessionStore(db), historyBudgetChars: () => 10_000, needsHistory: () => needsHistory });
    registerAttachments(runtime, {
      agent: () => ({ model: 'm', provider: 'echo', max_audio_duration_ms: 60_000, show_transcript: false }) as never,
      models: () => ({}),
      maxBytes: () => 1_000_000,
      timeoutMs: () => 5_000,
      transcriber: () => transcriber,
    });
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
    // The earlier exchange keeps its row, and is the new message's history.
    expect(rows(db)).toEqual([
      { user_text: 'hello', assistant_text: 'hello back', ending: 'done' },
      { user_text: 'hello', assistant_text: 'a new answer', ending: 'done' },
    ]);
    expect(later.runner.inputs[0]!.history.map((m) => m.content)).toEqual(['hello', 'hello back']);
  });

  it('a message id used again for a new inbox item is a new message, even dated before the row (a platform clock); the same item is a re-run', async () => {
    const db = openDb(':memory:');
    dbs.push(db);
    const msg = userMessage('t', 'hello', { receivedAt: Date.now() - 60_000 });
    const first = started(db, 'hello back');
    await first.runtime.run(answering(request('hello', sink(), { message: msg }), [{ id: 7, message: msg }]));

    // The next start: the inbox took the same id again as item 8 (the old item was pruned).
    const reused = started(db, 'a new answer');
    const outcome = await reused.runtime.run(answering(request('hello', sink(), { message: msg }), [{ id: 8, message: msg }]));
    expect(outcome).toMatchObject({ ending: 'done', text: 'a new answer' });
    expect(reused.runner.inputs[0]!.history.map((m) => m.content)).toEqual(['hello', 'hello back']);
    expect(rows(db)).toEqual([
      { user_text: 'hello', assistant_text: 'hello back', ending: 'done' },
      { user_text: 'hello', assistant_text: 'a new answer', ending: 'done' },
    ]);

    // Item 8 itself run again (the next start after that): its own answer, not item 7's.
    const rerun = started(db, 'asked again');
    const again = await rerun.runtime.run(answering(request('hello', sink(), { message: msg }), [{ id: 8, message: msg }]));
    expect(again).toMatchObject({ ending: 'done', text: 'a new answer' });
    expect(rerun.runner.inputs).toHaveLength(0);
  });

  it('a voice message heard, run again: its stored answer is marked to be spoken too, as its first run was; a text message is not', async () => {
    const db = openDb(':memory:');
    dbs.push(db);
    const voice = userMessage('t', '', { attachments: [{ id: 'v1', type: 'voice', mime: 'audio/ogg', durationMs: 2000 }] });
    const text = userMessage('t', 'and tomorrow?', { chat: { id: 'other', type: 'dm' } });
    const heard: Transcriber = async () => 'will it rain?';
    const first = started(db, 'Sunny.', true, heard);
    const download = async () => Buffer.from('OggS');
    expect(await first.runtime.run(request('', sink(), { message: voice, download }))).toMatchObject({ ending: 'done', spoke: true });
    await first.runtime.run(request('and tomorrow?', sink(), { message: text, scope: 't:other' }));

    const again = started(db, 'asked again', true, heard);
    expect(await again.runtime.run(request('', sink(), { message: voice, download }))).toMatchObject({ ending: 'done', text: 'Sunny.', spoke: true });
    const typed = await again.runtime.run(request('and tomorrow?', sink(), { message: text, scope: 't:other' }));
    expect(typed).toMatchObject({ ending: 'done', text: 'Sunny.' });
    expect(typed.spoke).toBeUndefined();
    expect(again.runner.inputs).toHaveLength(0);
  });

  it('a voice message not heard (no transcription model), run again: answered in text, as its first run was', async () => {
    const db = openDb(':memory:');
    dbs.push(db);
    const voice = userMessage('t', '', { attachments: [{ id: 'v1', type: 'voice', mime: 'audio/ogg', durationMs: 2000 }] });
    const download = async () => Buffer.from('OggS');
    const first = started(db, 'Please write instead.');
    const answered = await first.runtime.run(request('', sink(), { message: voice, download }));
    expect(answered.ending).toBe('done');
    expect(answered.spoke).toBeUndefined();

    const again = started(db, 'asked again');
    const replayed = await again.runtime.run(request('', sink(), { message: voice, download }));
    expect(replayed).toMatchObject({ ending: 'done', text: answered.text });
    // Before, any speech attachment marked the replay to be spoken.
    expect(replayed.spoke).toBeUndefined();
    expect(again.runner.inputs).toHaveLength(0);
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
