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

  /** runSocket on the fake with the test's token and stop; `over` replaces any option. */
  const socket = (over: Partial<Parameters<typeof runSocket>[0]>) =>
    runSocket({
      wsUrl: `${mm.url.replace('http', 'ws')}/api/v4/websocket`,
      token: mm.token,
      signal: stop.signal,
      connectTimeoutMs: 5000,
      pingIntervalMs: 60_000,
      onHello: () => {},
      afterHello: async () => {},
      onEvent: async () => {},
      ...over,
    });
  const open = (token: string, events: MmEvent[] = [], resume?: { connectionId: string; sequence: number }) =>
    socket({ token, resume, onEvent: async (ev) => void events.push(ev) });

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

  it('events past maxWaitingBytes behind a slow handler close the socket; it resolves once that handler is done', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const handled: MmEvent[] = [];
    const closes: string[] = [];
    let released = false;
    let resolvedBeforeRelease: boolean | undefined;
    const ended = socket({
      maxWaitingBytes: 12_000,
      onEvent: async (ev) => {
        handled.push(ev);
        await held;
      },
      onClose: (reason) => closes.push(reason),
    }).then((end) => {
      resolvedBeforeRelease = !released;
      return end;
    });
    await waitFor(() => mm.connected);
    let reachedSocket = 0;
    for (let i = 0; i < 20 && mm.connected; i++) {
      reachedSocket++;
      mm.userPost(`${i} ${'x'.repeat(3000)}`);
      await mm.sync();
    }
    // The first is handled; three of about 3.5 KB wait; a fourth would pass 12,000 bytes.
    expect(reachedSocket).toBe(5);
    expect(mm.connected).toBe(false);
    expect(handled).toHaveLength(1);
    expect(closes).toHaveLength(1);
    expect(closes[0]).toMatch(/^3 events \(\d+ bytes\) already wait behind a slow handler/);
    expect(resolvedBeforeRelease).toBeUndefined();
    released = true;
    release();
    const end = await ended;
    expect(resolvedBeforeRelease).toBe(false);
    expect(end).toMatchObject({ reason: closes[0], sequence: 1, lostEvents: true });
  });

  it('stopping does not wait for a handler that never ends', async () => {
    let handled = 0;
    const ended = socket({
      maxWaitingEvents: 1,
      onEvent: () => {
        handled++;
        return new Promise(() => {});
      },
    });
    await waitFor(() => mm.connected);
    // The first is in the handler before the others come (on a busy machine all three could
    // otherwise arrive before it, and the overflow close would come with none handled).
    mm.userPost('0');
    await waitFor(() => handled === 1);
    for (let i = 1; i < 3; i++) mm.userPost(`${i}`);
    await waitFor(() => !mm.connected);
    stop.abort();
    expect(await ended).toMatchObject({ lostEvents: true });
    expect(handled).toBe(1);
  });

  it('resumes with connection_id and sequence_number; stopping ends it cleanly', async () => {
    const ended = open(mm.token, [], { connectionId: 'c0', sequence: 7 });
    await waitFor(() => mm.connected);
    expect(mm.lastSocketUrl).toContain('connection_id=c0&sequence_number=7');
    stop.abort();
    expect((await ended).reason).toBe('stopped');
  });
});
