import { describe, expect, it } from 'vitest';
import type { TeamsAdapter } from '../../../channels/teams/adapter.js';
import type { AgentEvent } from '../../../src/contracts/agent-events.js';
import type { NativeStream, NativeStreamOptions, ToolProgress } from '../../../src/contracts/channel.js';
import type { ReplyTarget } from '../../../src/contracts/message.js';
import { ReplyStream } from '../../../src/stream/reply-stream.js';
import type { Transport } from '../../../src/stream/reply-options.js';
import { type FakeTeams, INFORMATIVE_AFTER_STREAMING, STREAM_NOT_CONTINUED } from '../../fakes/teams/server.js';
import { waitFor } from '../../helpers/daemon.js';
import { teamsAdapterOn, withTeams } from '../../helpers/teams.js';

const DM = 'a:1personal-ada';
const TARGET: ReplyTarget = { channelId: 'ms', chatId: DM, chatType: 'dm', replyToMessageId: `${DM}|1` };
const done: AgentEvent = { type: 'done', usage: { inputTokens: 0, outputTokens: 0, estimated: true } };
const start = (id: string, name = 'fs__read_file'): AgentEvent => ({ type: 'tool_start', id, name, input: {} });
const note = (id: string, text: string): AgentEvent => ({ type: 'tool_log', id, text });
const end = (id: string, name = 'fs__read_file'): AgentEvent => ({ type: 'tool_end', id, name, output: 'ok' });

type Step = { text: string; progress: readonly ToolProgress[] | undefined };

/**
 * The adapter as a reply's transport, each `update` of its native stream noted once it settled:
 * how a test knows the reply took a step for which Teams may be sent nothing.
 */
function noting(adapter: TeamsAdapter, steps: Step[]): Transport {
  const watch = (s: NativeStream): NativeStream =>
    new Proxy(s, {
      get(t, p) {
        if (p !== 'update' || !t.update) return Reflect.get(t, p, t);
        return async (text: string, o: NativeStreamOptions) => {
          await t.update!(text, o);
          steps.push({ text, progress: o.progress });
        };
      },
    });
  return new Proxy(adapter, {
    get(t, p) {
      if (p === 'openNativeStream') return async (...a: Parameters<TeamsAdapter['openNativeStream']>) => watch((await t.openNativeStream(...a))!);
      const v = Reflect.get(t, p, t);
      return typeof v === 'function' ? v.bind(t) : v;
    },
  });
}

/** A reply in the 1:1 chat with tool progress on or off; what went wrong is collected, not thrown. */
function replyOn(adapter: TeamsAdapter, o: { showToolProgress: boolean; steps?: Step[]; signal?: AbortSignal }) {
  const errors: unknown[] = [];
  let fallbacks = 0;
  const stream = new ReplyStream({
    transport: o.steps ? noting(adapter, o.steps) : adapter,
    // The pacing is not what is tested, and the fake does not throttle: steps 300 ms apart, not 1.5 s.
    capabilities: { ...adapter.capabilities, minEditIntervalMs: 300 },
    target: TARGET,
    streamMode: 'partial',
    showToolProgress: o.showToolProgress,
    finalDeadlineMs: 30_000,
    signal: o.signal ?? new AbortController().signal,
    onError: (err) => errors.push(err),
    onFallback: () => fallbacks++,
  });
  return { stream, errors, fallbacks: () => fallbacks };
}

const updatesOf = (ms: FakeTeams, type: 'streaming' | 'informative') => ms.streamUpdates.filter((u) => u.streamType === type).map((u) => u.text);
const finals = (ms: FakeTeams) => ms.callsOf('stream').filter((c) => c.body.entities[0].streamType === 'final');

/** One message, streamed append-only (every streamed text contains the one before), ended by one final with `answer`, nothing refused or edited. */
function expectOneStreamedAnswer(ms: FakeTeams, answer: string, r: { errors: unknown[]; fallbacks: () => number }) {
  expect(r.errors).toEqual([]);
  expect(r.fallbacks()).toBe(0);
  const streamed = updatesOf(ms, 'streaming');
  expect(streamed.length).toBeGreaterThanOrEqual(1);
  for (let i = 1; i < streamed.length; i++) expect(streamed[i]!.startsWith(streamed[i - 1]!)).toBe(true);
  expect(answer.startsWith(streamed.at(-1)!)).toBe(true);
  expect(ms.streamUpdates.map((u) => u.sequence)).toEqual(ms.streamUpdates.map((_, i) => i + 1));
  expect(finals(ms).map((c) => c.body.text)).toEqual([answer]);
  expect(ms.activities).toHaveLength(1);
  expect(ms.activities[0]).toMatchObject({ text: answer, streamed: true, streaming: false, updates: 0 });
  expect(ms.activities[0]!.informative).toBeUndefined();
  expect(ms.callsOf('update')).toEqual([]);
  expect(ms.callsOf('send')).toEqual([]);
}

describe('Teams native streams: tool progress never breaks the append-only stream', () => {
  // Before: the progress line went into the streamed text ('⏳ fs__read_file…'); the next update,
  // the answer without it, did not contain it: 403 ContentStreamNotAllowed, an error logged, and
  // the reply fell back to updating a message still streaming.
  it('a tool first, with notes: informative updates (a long note cut to 1000 characters / 1 KB), then the answer streams; the final is the answer', async () => {
    const ms = await withTeams();
    const adapter = teamsAdapterOn(ms, DM);
    const r = replyOn(adapter, { showToolProgress: true });
    // Waits on what Teams shows, however the stream shows it (before the change: as streamed text).
    const shows = (line: string) => ms.streamUpdates.some((u) => u.text === line);
    r.stream.push(start('call_1'));
    await waitFor(() => shows('⏳ fs__read_file…'));
    r.stream.push(note('call_1', 'reading 1/3'));
    await waitFor(() => shows('⏳ fs__read_file… reading 1/3'));
    r.stream.push(note('call_1', 'é'.repeat(2000)));
    await waitFor(() => ms.streamUpdates.some((u) => u.text.includes('éé')));
    r.stream.push(end('call_1'));
    r.stream.push({ type: 'text_delta', text: 'The file says ' });
    await waitFor(() => ms.activities[0]?.text.startsWith('The file says'));
    r.stream.push({ type: 'text_delta', text: '**42**.' });
    r.stream.push(done);
    expect((await r.stream.finished()).delivered).toBe(true);

    expectOneStreamedAnswer(ms, 'The file says **42**.', r);
    const informative = updatesOf(ms, 'informative');
    expect(informative.slice(0, 2)).toEqual(['⏳ fs__read_file…', '⏳ fs__read_file… reading 1/3']);
    const long = informative[2]!;
    expect(long.length).toBeLessThanOrEqual(1000);
    expect(Buffer.byteLength(long)).toBeLessThanOrEqual(1024);
    expect(long).toBe(`⏳ fs__read_file… ${'é'.repeat(500)}…`);
    // The informative updates all came before the first streamed text.
    const kinds = ms.streamUpdates.map((u) => u.streamType);
    expect(kinds.lastIndexOf('informative')).toBeLessThan(kinds.indexOf('streaming'));
  });

  it('text, then a tool (with a note), then more text: the tool shows nothing once text streams, and the text goes on', async () => {
    const ms = await withTeams();
    const adapter = teamsAdapterOn(ms, DM);
    const steps: Step[] = [];
    const r = replyOn(adapter, { showToolProgress: true, steps });
    r.stream.push({ type: 'text_delta', text: 'Let me read it. ' });
    await waitFor(() => updatesOf(ms, 'streaming').length === 1);
    r.stream.push(start('call_2'));
    r.stream.push(note('call_2', 'page 1'));
    // The reply took the tool's step (before the change: the progress line in the streamed text).
    await waitFor(() => steps.some((s) => s.progress?.some((p) => p.note === 'page 1') || s.text.includes('page 1')));
    const streamedAtTheTool = ms.streamUpdates.map((u) => u.text);
    r.stream.push(end('call_2'));
    r.stream.push({ type: 'text_delta', text: 'It says 42.' });
    r.stream.push(done);
    expect((await r.stream.finished()).delivered).toBe(true);

    expectOneStreamedAnswer(ms, 'Let me read it. It says 42.', r);
    // The progress was given to the stream, not put in the text, and Teams was sent nothing for it.
    expect(steps.every((s) => !s.text.includes('⏳'))).toBe(true);
    expect(streamedAtTheTool).toEqual(['Let me read it. ']);
    expect(updatesOf(ms, 'informative')).toEqual([]);
  });

  it('show_tool_progress off: no progress, no informative update, the text streams as before', async () => {
    const ms = await withTeams();
    const adapter = teamsAdapterOn(ms, DM);
    const steps: Step[] = [];
    const r = replyOn(adapter, { showToolProgress: false, steps });
    r.stream.push({ type: 'text_delta', text: 'Reading. ' });
    await waitFor(() => updatesOf(ms, 'streaming').length === 1);
    r.stream.push(start('call_3'));
    r.stream.push(note('call_3', 'page 1'));
    r.stream.push(end('call_3'));
    r.stream.push({ type: 'text_delta', text: 'Done reading.' });
    await waitFor(() => updatesOf(ms, 'streaming').length === 2);
    r.stream.push(done);
    expect((await r.stream.finished()).delivered).toBe(true);

    expectOneStreamedAnswer(ms, 'Reading. Done reading.', r);
    expect(updatesOf(ms, 'informative')).toEqual([]);
    expect(steps.every((s) => s.progress === undefined)).toBe(true);
  });
});

describe('Teams native streams: the end of a stream', () => {
  it('a final that does not continue what was streamed ends the stream with it, then updates the message; an update that does not continue sends nothing', async () => {
    const ms = await withTeams();
    const adapter = teamsAdapterOn(ms, DM);
    const signal = AbortSignal.timeout(10_000);
    const stream = (await adapter.openNativeStream(TARGET))!;
    expect(stream.showsToolProgress).toBe(true);
    await stream.update!('One two three', { signal });
    await stream.update!('Something else', { signal });
    expect(ms.streamUpdates.map((u) => u.text)).toEqual(['One two three']);
    // The answer outgrew one message and was cut before what was streamed.
    const ref = await stream.finish('One two', { signal, final: false });
    expect(ref).toEqual(stream.ref);
    expect(finals(ms).map((c) => c.body.text)).toEqual(['One two three']);
    expect(ms.callsOf('update').map((c) => c.body.text)).toEqual(['One two']);
    expect(ms.activities).toHaveLength(1);
    expect(ms.activities[0]).toMatchObject({ text: 'One two', streaming: false });
  });

  it('released without its final (a hard stop): ended once with what was streamed; one with only an informative update is left to Teams', async () => {
    const ms = await withTeams();
    const adapter = teamsAdapterOn(ms, DM);
    const hardStop = new AbortController();
    const r = replyOn(adapter, { showToolProgress: true, signal: hardStop.signal });
    r.stream.push({ type: 'text_delta', text: 'Half an answer' });
    await waitFor(() => updatesOf(ms, 'streaming').length === 1);
    // A shutdown past its grace: the turn is cut and the reply's every call with it.
    hardStop.abort(new Error('shutdown'));
    r.stream.push({ type: 'cancelled' });
    expect((await r.stream.finished()).delivered).toBe(false);
    // The adapter's close waits for the released stream's final.
    await adapter.close();
    expect(finals(ms).map((c) => c.body.text)).toEqual(['Half an answer']);
    expect(ms.activities[0]).toMatchObject({ text: 'Half an answer', streaming: false });

    const signal = AbortSignal.timeout(10_000);
    const other = (await adapter.openNativeStream(TARGET))!;
    await other.update!('', { signal, progress: [{ id: 'c', name: 'search', state: 'running' }] });
    other.release!();
    other.release!();
    await adapter.close();
    expect(finals(ms)).toHaveLength(1);
    expect(ms.activities[1]).toMatchObject({ text: '', informative: '⏳ search…', streaming: true });

    // Released after its final: nothing more.
    const third = (await adapter.openNativeStream(TARGET))!;
    await third.update!('All', { signal });
    await third.finish('All of it', { signal, final: true });
    third.release!();
    await adapter.close();
    expect(finals(ms).map((c) => c.body.text)).toEqual(['Half an answer', 'All of it']);
  });
});

describe('the Teams fake enforces the documented stream rules', () => {
  it('streamed text must contain the previous one (403 ContentStreamNotAllowed); informative updates only before it, within 1000 characters', async () => {
    const ms = await withTeams();
    const form = { grant_type: 'client_credentials', client_id: ms.appId, client_secret: ms.password, scope: 'https://api.botframework.com/.default' };
    const { access_token: token } = (await (await fetch(ms.tokenUrl, { method: 'POST', body: new URLSearchParams(form) })).json()) as { access_token: string };
    const post = async (text: string, info: Record<string, unknown>, type = 'typing') => {
      const res = await fetch(`${ms.serviceUrl}v3/conversations/${encodeURIComponent(DM)}/activities`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ type, text, entities: [{ type: 'streaminfo', ...info }] }),
      });
      return { status: res.status, body: (await res.json()) as { id?: string; error?: { code: string; message: string } } };
    };
    const first = await post('A brown', { streamType: 'streaming', streamSequence: 1 });
    expect(first.status).toBe(201);
    const streamId = first.body.id;
    expect((await post('A brown fox', { streamId, streamType: 'streaming', streamSequence: 2 })).status).toBe(201);
    expect(await post('Hello', { streamId, streamType: 'streaming', streamSequence: 3 })).toEqual({
      status: 403,
      body: { error: { code: 'ContentStreamNotAllowed', message: STREAM_NOT_CONTINUED } },
    });
    expect(await post('Searching…', { streamId, streamType: 'informative', streamSequence: 4 })).toMatchObject({
      status: 400,
      body: { error: { message: INFORMATIVE_AFTER_STREAMING } },
    });
    expect((await post('A brown dog', { streamId, streamType: 'final' }, 'message')).status).toBe(403);
    expect((await post('A brown fox jumps', { streamId, streamType: 'final' }, 'message')).status).toBe(201);

    expect((await post('x'.repeat(1001), { streamType: 'informative', streamSequence: 1 })).body.error?.message).toBe('Message size too large');
    const info = await post('Searching…', { streamType: 'informative', streamSequence: 1 });
    expect(info.status).toBe(201);
    // The streamed text replaces the informative update: it need not contain it.
    expect((await post('Found it', { streamId: info.body.id, streamType: 'streaming', streamSequence: 2 })).status).toBe(201);
  });
});
