import { describe, expect, it } from 'vitest';
import { ConnectorError, classifyTeamsError } from '../../../channels/teams/connector.js';
import { stoppedByUser } from '../../../channels/teams/stop.js';
import { STOP_MARKER } from '../../../src/stream/reply-stream.js';
import { STREAM_CANCELLED_BY_USER } from '../../fakes/teams/server.js';
import { waitFor } from '../../helpers/daemon.js';
import { withChannelDaemon } from '../../helpers/fixtures.js';
import { teamsAdapterOn, teamsChannel, teamsEnv, withTeams } from '../../helpers/teams.js';
import { echoAgent } from '../../helpers/toml.js';

const words = (n: number) => Array.from({ length: n }, (_, i) => `word${i}`).join(' ');
const DM = 'a:1personal-ada';
/** What the bot asks of the Connector that the user would see (a stream request, a post, an update, a delete). */
const WRITES = new Set(['stream', 'send', 'reply', 'update', 'delete']);

describe("Teams' Stop button", () => {
  it('stops the turn as /stop does: nothing more is sent, the streamed text stays as it was', async () => {
    const ms = await withTeams();
    // 60 words 150 ms apart: about nine seconds of answer, stopped after the first second or two.
    const d = await withChannelDaemon(echoAgent(150) + teamsChannel(ms), teamsEnv(ms));
    ms.webhook = `${d.url}/webhooks/ms`;
    expect(await ms.post(ms.activity(words(60)))).toBe(200);
    await waitFor(() => ms.streamUpdates.length >= 2, 15_000);
    const streamed = ms.pressStop(DM);
    const shown = streamed.text;
    const callsAtStop = ms.calls.length;
    // The user asks again at once: the question waits behind the stopped turn and is answered
    // (the Stop stops that one answer, not the conversation's queue).
    expect(await ms.post(ms.activity('and now something short'))).toBe(200);

    const finished = await waitFor(() => d.logs.entries().find((l) => l.msg === 'turn finished'), 15_000);
    expect(finished.outcome).toBe('cancelled');
    expect(d.logs.entries().some((l) => l.msg === 'Teams: the user pressed Stop; the answer ends where it was')).toBe(true);
    await waitFor(() => ms.texts(DM)[1] === 'and now something short', 15_000);
    // One request learnt of the Stop (403 "cancelled by user"); after it, nothing for that answer.
    const ofStopped = (c: { path: string; body: { entities?: Array<{ streamId?: string }> } | undefined }) =>
      c.body?.entities?.[0]?.streamId === streamed.id || c.path.endsWith(`/activities/${encodeURIComponent(streamed.id)}`);
    const after = ms.calls.slice(callsAtStop).filter((c) => WRITES.has(c.name) && ofStopped(c));
    expect(after.map((c) => c.name)).toEqual(['stream']);
    expect(ms.activities).toHaveLength(2);
    expect(ms.texts(DM)).toEqual([shown, 'and now something short']);
    expect(shown).not.toContain(STOP_MARKER);
    expect(streamed.updates).toBe(0);
    expect(ms.activities[1]!.streamed).toBe(true);
  });

  it('the stream tells the reply REPLY_STOPPED_BY_USER once, then takes no change of that answer', async () => {
    const ms = await withTeams();
    // The adapter knows where this chat is served, as an earlier message told the channel.
    const adapter = teamsAdapterOn(ms, DM);
    const signal = AbortSignal.timeout(10_000);
    const target = { channelId: 'ms', chatId: DM, chatType: 'dm' as const, replyToMessageId: `${DM}|1` };
    const stream = (await adapter.openNativeStream(target))!;
    await stream.update!('first words', { signal });
    ms.pressStop(DM);
    await expect(stream.update!('first words and more', { signal })).rejects.toMatchObject({ code: 'REPLY_STOPPED_BY_USER' });
    await expect(stream.update!('first words and more still', { signal })).rejects.toMatchObject({ code: 'REPLY_STOPPED_BY_USER' });
    // Whatever the reply still does with this answer goes nowhere.
    expect(await stream.finish('first words and more\n\n⏹ Stopped.', { signal, final: true })).toEqual(stream.ref);
    await adapter.edit(stream.ref!, 'changed', { signal });
    await adapter.delete(stream.ref!, { signal });
    expect(await adapter.send(target, 'more', { signal })).toEqual(stream.ref);
    expect(ms.calls.filter((c) => WRITES.has(c.name)).map((c) => c.name)).toEqual(['stream', 'stream']);
    expect(ms.texts(DM)).toEqual(['first words']);
  });
});

describe("Teams' 403s on a stream", () => {
  const refused = (message: string, status = 403, code = 'ContentStreamNotAllowed') =>
    classifyTeamsError(new ConnectorError(status, code, undefined, `POST /v3/conversations/c/activities: ${status} ${code} ${message}`), 'stream');

  it('only "cancelled by user" is the Stop; the other refusals stay errors the reply goes on after', () => {
    expect(stoppedByUser(refused(STREAM_CANCELLED_BY_USER))).toBe(true);
    expect(stoppedByUser(refused('Content stream was canceled by user.'))).toBe(true);
    for (const other of [
      'Content stream is not allowed',
      'Content stream is not allowed on an already completed streamed message',
      'Content stream finished due to exceeded streaming time.',
      'Message size too large',
    ])
      expect(stoppedByUser(refused(other))).toBe(false);
    expect(stoppedByUser(refused(STREAM_CANCELLED_BY_USER, 403, 'Forbidden'))).toBe(false);
    expect(stoppedByUser(refused(STREAM_CANCELLED_BY_USER, 400))).toBe(false);
    expect(refused(STREAM_CANCELLED_BY_USER).code).toBe('CHANNEL_FORBIDDEN');
  });
});
