import { describe, expect, it } from 'vitest';
import type { TeamsAdapter } from '../../../channels/teams/adapter.js';
import type { AgentEvent } from '../../../src/contracts/agent-events.js';
import type { ReplyTarget } from '../../../src/contracts/message.js';
import type { Transport } from '../../../src/stream/reply-options.js';
import { ReplyStream } from '../../../src/stream/reply-stream.js';
import type { FakeTeams } from '../../fakes/teams/server.js';
import { waitFor } from '../../helpers/daemon.js';
import { teamsAdapterOn, withTeams } from '../../helpers/teams.js';

const DM = 'a:1personal-ada';
const TARGET: ReplyTarget = { channelId: 'ms', chatId: DM, chatType: 'dm', replyToMessageId: `${DM}|1` };
const done: AgentEvent = { type: 'done', usage: { inputTokens: 0, outputTokens: 0, estimated: true } };
const ANSWER = 'Part one. Part two.';

/** The adapter as a reply's transport, each `edit` noted when the reply calls it (before it goes out). */
function notingEdits(adapter: TeamsAdapter, edits: string[]): Transport {
  return new Proxy(adapter, {
    get(t, p) {
      if (p === 'edit') return (...a: Parameters<TeamsAdapter['edit']>) => (edits.push(a[1]), t.edit(...a));
      const v = Reflect.get(t, p, t);
      return typeof v === 'function' ? v.bind(t) : v;
    },
  });
}

function replyOn(adapter: TeamsAdapter, signal: AbortSignal, transport: Transport = adapter) {
  return new ReplyStream({
    transport,
    // The pacing is not what is tested, and the fake does not throttle: steps 300 ms apart, not 1.5 s.
    capabilities: { ...adapter.capabilities, minEditIntervalMs: 300 },
    target: TARGET,
    streamMode: 'partial',
    showToolProgress: false,
    finalDeadlineMs: 30_000,
    signal,
  });
}

const finals = (ms: FakeTeams) => ms.callsOf('stream').filter((c) => c.body.entities[0].streamType === 'final');
const streamedCount = (ms: FakeTeams) => ms.streamUpdates.filter((u) => u.streamType === 'streaming').length;

describe('Teams native streams: a released stream and the reply that goes on', () => {
  // Before: the reply's update (PUT) went out while the release's final was still being tried;
  // Teams refused an update of the stream still open and the answer went as a second message
  // (where Teams takes it, the late final would put the partial text back).
  it('the final fails (502), the reply falls back: its update waits for the release final (429, then held), and the one message ends with the whole answer', async () => {
    const ms = await withTeams();
    ms.refuseUpdatesWhileStreaming = true;
    const adapter = teamsAdapterOn(ms, DM);
    const edits: string[] = [];
    const reply = replyOn(adapter, new AbortController().signal, notingEdits(adapter, edits));
    reply.push({ type: 'text_delta', text: 'Part one. ' });
    await waitFor(() => streamedCount(ms) === 1);
    ms.fail('stream', { status: 502 });
    ms.fail('stream', { status: 429, retryAfterS: 1 });
    const late = ms.hold('stream');
    reply.push({ type: 'text_delta', text: 'Part two.' });
    reply.push(done);
    // The release's final, after its 429, is on the wire, and the reply has started its update.
    await waitFor(() => finals(ms).length === 3 && edits.length > 0);
    late.release();
    expect((await reply.finished()).delivered).toBe(true);
    await adapter.close();

    expect(finals(ms).map((c) => c.body.text)).toEqual([ANSWER, 'Part one. ', 'Part one. ']);
    expect(ms.callsOf('send')).toEqual([]);
    expect(ms.activities).toHaveLength(1);
    expect(ms.activities[0]).toMatchObject({ text: ANSWER, streaming: false, updates: 1 });
  });

  // Before: the call cut by the hard stop let the release send a final at once, with the
  // partial text; it completed the stream first and the whole answer's final got 403.
  it('the reply is cut while its final is in flight, which Teams then takes: exactly one final, with the whole answer', async () => {
    const ms = await withTeams();
    const adapter = teamsAdapterOn(ms, DM);
    const hardStop = new AbortController();
    const reply = replyOn(adapter, hardStop.signal);
    reply.push({ type: 'text_delta', text: 'Part one. ' });
    await waitFor(() => streamedCount(ms) === 1);
    const inFlight = ms.hold('stream');
    reply.push({ type: 'text_delta', text: 'Part two.' });
    reply.push(done);
    await waitFor(() => finals(ms).length === 1);
    hardStop.abort(new Error('shutdown'));
    expect((await reply.finished()).delivered).toBe(false);
    inFlight.release();
    // The adapter's close waits for the released stream's end.
    await adapter.close();

    expect(finals(ms).map((c) => c.body.text)).toEqual([ANSWER]);
    expect(ms.activities).toHaveLength(1);
    expect(ms.activities[0]).toMatchObject({ text: ANSWER, streaming: false, updates: 0 });
  });

  // Before: with no stream id yet the release did nothing; the first request, no longer cut by
  // the reply's signal, landed all the same and the message showed streaming until Teams' limit.
  // (The release's own final held past its 5 s is not tested: only a wall-clock wait shows it.)
  it('the reply is cut while its first streaming request is in flight, which Teams then takes: one final ends the stream with what was streamed', async () => {
    const ms = await withTeams();
    const adapter = teamsAdapterOn(ms, DM);
    const hardStop = new AbortController();
    const reply = replyOn(adapter, hardStop.signal);
    const first = ms.hold('stream');
    reply.push({ type: 'text_delta', text: 'Part one. ' });
    await waitFor(() => ms.callsOf('stream').length === 1);
    // The turn ends while that request is out; the hard stop cuts it before Teams answers.
    reply.push(done);
    hardStop.abort(new Error('shutdown'));
    expect((await reply.finished()).delivered).toBe(false);
    first.release();
    // The adapter's close waits for the released stream's end.
    await adapter.close();

    expect(finals(ms).map((c) => c.body.text)).toEqual(['Part one. ']);
    expect(ms.activities).toHaveLength(1);
    expect(ms.activities[0]).toMatchObject({ text: 'Part one. ', streaming: false });
  });
});
