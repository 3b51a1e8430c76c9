import { describe, expect, it } from 'vitest';
import type { ChannelMessage, MessageRef } from '../../../src/contracts/message.js';
import { createLogger } from '../../../src/observe/logger.js';
import { ApprovalStore } from '../../../src/store/approvals.js';
import { openDb } from '../../../src/store/db.js';
import { ApprovalCoordinator, callKey } from '../../../src/tools/approvals.js';
import { LogSink, waitFor } from '../../helpers/daemon.js';

const message: ChannelMessage = {
  channelId: 'web',
  kind: 'webchat',
  messageId: 'm1',
  chat: { id: 'tab', type: 'dm' },
  sender: { id: 'ada', name: 'Ada', isBot: false },
  text: 'go',
  attachments: [],
  addressed: true,
  receivedAt: 0,
};

/** A coordinator on a real SQLite file, as a process would have it; `posts` records the questions. */
function coordinator(db: ReturnType<typeof openDb>, store: ApprovalStore = new ApprovalStore(db), logs = new LogSink()) {
  const posts: string[] = [];
  const edits: string[] = [];
  const c = new ApprovalCoordinator({
    store,
    log: createLogger({ level: 'warn', destination: logs }),
    policy: () => ({ approvers: [], timeoutMs: 60_000 }),
    send: async (_t, text) => {
      posts.push(text);
      return { chatId: 'tab', messageId: `q${posts.length}` } satisfies MessageRef;
    },
    edit: async (_c, _r, text) => void edits.push(text),
  });
  return { c, posts, edits };
}
const call = {
  agent: 'default',
  tool: 'fs__edit_file',
  args: { path: '/x' },
  ctx: { signal: new AbortController().signal, scope: 'web:tab', timeZone: 'UTC', message },
};
const idOf = (text: string) => /\/approve ([0-9a-f]{6})/.exec(text)![1]!;

describe('ApprovalCoordinator across restarts (the same SQLite database)', () => {
  it('a call approved and started before a crash is not started again; a finished one gives its stored result', async () => {
    const db = openDb(':memory:');
    const first = coordinator(db);
    const admitted = first.c.admit(call, new AbortController().signal);
    await waitFor(() => first.posts.length === 1);
    expect(await first.c.decide(message, 'web:tab', 'approve', idOf(first.posts[0]!))).toBeUndefined();
    const verdict = await admitted;
    expect(verdict.run).toBe(true);
    // The process dies here, after the call started and before it finished.

    const second = coordinator(db);
    expect(await second.c.admit(call, new AbortController().signal)).toEqual({
      run: false,
      reply: { error: 'this call was started before a restart and may have run; it is not run twice' },
    });
    expect(second.posts).toEqual([]);

    // Once a call finished, a re-run gets what the model was told then.
    if (verdict.run) verdict.done('Edited.');
    expect(await coordinator(db).c.admit(call, new AbortController().signal)).toEqual({ run: false, reply: 'Edited.' });
  });

  it('a denied call stays denied after a restart; a question with no decision is asked again', async () => {
    const db = openDb(':memory:');
    const first = coordinator(db);
    const denied = first.c.admit({ ...call, args: { path: '/denied' } }, new AbortController().signal);
    await waitFor(() => first.posts.length === 1);
    await first.c.decide(message, 'web:tab', 'deny', '');
    expect(await denied).toEqual({ run: false, reply: { error: 'the user denied this tool call' } });
    expect(await coordinator(db).c.admit({ ...call, args: { path: '/denied' } }, new AbortController().signal)).toEqual({
      run: false,
      reply: { error: 'the user denied this tool call' },
    });

    const stop = new AbortController();
    const waiting = first.c.admit(call, stop.signal);
    await waitFor(() => first.posts.length === 2);
    const second = coordinator(db);
    const again = second.c.admit(call, new AbortController().signal);
    await waitFor(() => second.posts.length === 1);
    // The old question is retired; the new one has a new id.
    expect(second.edits).toEqual(['🔐 fs__edit_file: asked again below after a restart.']);
    expect(idOf(second.posts[0]!)).not.toBe(idOf(first.posts[1]!));
    await second.c.decide(message, 'web:tab', 'approve', idOf(second.posts[0]!));
    expect((await again).run).toBe(true);
    stop.abort();
    expect(await waiting).toEqual({ run: false, reply: { error: 'cancelled by the user' } });
  });
  it('a decision made while no process waits on the question (its turn is moving) is applied when the turn reaches the call again', async () => {
    const db = openDb(':memory:');
    const first = coordinator(db);
    const stop = new AbortController();
    const waiting = first.c.admit(call, stop.signal);
    await waitFor(() => first.posts.length === 1);
    const id = idOf(first.posts[0]!);
    // The owner dies with the question open; the decision reaches a process that does not wait on it.
    const elsewhere = coordinator(db);
    expect(await elsewhere.c.decide({ ...message, sender: { ...message.sender, id: 'eve' } }, 'web:tab', 'approve', id)).toMatch(/^Noted/);
    // Someone who may not decide: the turn asks again rather than running.
    const taken = coordinator(db);
    const asked = taken.c.admit(call, new AbortController().signal);
    await waitFor(() => taken.posts.length === 1);
    stop.abort();
    await waiting;
    // Left by the person who started the turn: applied without asking; the old question says so.
    const newId = idOf(taken.posts[0]!);
    const third = coordinator(db);
    expect(await third.c.decide(message, 'web:tab', 'approve', newId)).toMatch(/^Noted/);
    expect(await third.c.decide(message, 'web:tab', 'approve', 'ffffff')).toBe('That approval is no longer waiting.');
    const fourth = coordinator(db);
    expect((await fourth.c.admit(call, new AbortController().signal)).run).toBe(true);
    expect(fourth.posts).toEqual([]);
    expect(fourth.edits).toEqual(['✅ fs__edit_file: approved.']);
    await taken.c.decide(message, 'web:tab', 'deny', newId);
    await asked;
  });

  it('a question posted whose message id could not be stored still takes its decision, and the call runs', async () => {
    const db = openDb(':memory:');
    // The real store, whose write of the question's message id fails once (a full disk, a database blip).
    class PromptRefWriteFails extends ApprovalStore {
      failures = 1;
      override async update(...args: Parameters<ApprovalStore['update']>): Promise<void> {
        if (args[2]?.promptRef && this.failures-- > 0) throw new Error('SQLITE_FULL: database or disk is full');
        return super.update(...args);
      }
    }
    const store = new PromptRefWriteFails(db);
    const logs = new LogSink();
    const node = coordinator(db, store, logs);
    const admitted = node.c.admit(call, new AbortController().signal);
    await waitFor(() => node.posts.length === 1);
    await waitFor(() => store.failures === 0);
    // The button's payload: applied here, not left for another instance.
    expect(await node.c.decide(message, 'web:tab', 'approve', idOf(node.posts[0]!))).toBeUndefined();
    const verdict = await admitted;
    expect(verdict.run).toBe(true);
    expect(node.edits).toEqual(['✅ fs__edit_file: approved.']);
    expect(logs.text).toContain('could not store the message id of the approval question');
    expect((await store.get(callKey('default', message, undefined, call.tool, call.args)))?.state).toBe('running');
  });
});
