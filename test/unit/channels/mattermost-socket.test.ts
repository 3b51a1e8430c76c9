import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runSocket, type MmEvent } from '../../../channels/mattermost/socket.js';
import { FakeMattermost } from '../../fakes/mattermost/server.js';
import { waitFor } from '../../helpers/daemon.js';

/** runSocket against the fake server's WebSocket: the challenge, hello, seq checks. */
describe('Mattermost WebSocket connection', () => {
  let mm: FakeMattermost;
  let stop: AbortController;
  beforeEach(async () => {
    mm = new FakeMattermost();
    await mm.start();
    stop = new AbortController();
  });
  afterEach(async () => {
    stop.abort();
    await mm.close();
  });

  const open = (token: string, events: MmEvent[] = [], resume?: { connectionId: string; sequence: number }) =>
    runSocket({
      wsUrl: `${mm.url.replace('http', 'ws')}/api/v4/websocket`,
      token,
      signal: stop.signal,
      resume,
      connectTimeoutMs: 5000,
      pingIntervalMs: 60_000,
      onHello: () => {},
      afterHello: async () => {},
      onEvent: async (ev) => void events.push(ev),
    });

  it('a refused authentication_challenge is fatal: CHANNEL_AUTH_FAILED', async () => {
    await expect(open('wrong')).rejects.toMatchObject({ code: 'CHANNEL_AUTH_FAILED', retryable: false });
  });

  it('events in seq order are handled; a gap ends the connection with where it stood', async () => {
    const events: MmEvent[] = [];
    const ended = open(mm.token, events);
    await waitFor(() => mm.connected);
    mm.userPost('one');
    await waitFor(() => events.length === 1);
    mm.skipSeq();
    mm.userPost('two');
    const end = await ended;
    expect(end.reason).toBe('event seq 3 where 2 was due: events were lost');
    expect(end.sequence).toBe(1);
    expect(end.connectionId).toMatch(/^[0-9a-f]{26}$/);
    expect(end.lostEvents).toBe(true);
    expect(events).toHaveLength(1);
  });

  it('an event numbered lower than due (a replay on a resumed connection) is handled, not a gap', async () => {
    const events: MmEvent[] = [];
    const ended = open(mm.token, events);
    await waitFor(() => mm.connected);
    const post = mm.userPost('one');
    await waitFor(() => events.length === 1);
    mm.replay(mm.postedEvent(post, 'ada'), 1);
    mm.userPost('two');
    await waitFor(() => events.length === 3);
    stop.abort();
    expect((await ended).reason).toBe('stopped');
  });

  it('resumes with connection_id and sequence_number; stopping ends it cleanly', async () => {
    const ended = open(mm.token, [], { connectionId: 'c0', sequence: 7 });
    await waitFor(() => mm.connected);
    expect(mm.lastSocketUrl).toContain('connection_id=c0&sequence_number=7');
    stop.abort();
    expect((await ended).reason).toBe('stopped');
  });
});
