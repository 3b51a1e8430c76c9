import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ChannelMessage } from '../../../src/contracts/message.js';
import type { FakeMatrix } from '../../fakes/matrix/server.js';
import { waitFor } from '../../helpers/daemon.js';
import { withTempDir } from '../../helpers/fixtures.js';
import { autoJoinAdapter, listenInto, withMatrix } from '../../helpers/matrix.js';

interface Line {
  level: number;
  msg: string;
  room?: string;
  attempt?: number;
  attempts?: number;
  retryInMs?: number;
  err?: string;
}

const RETRYING = 'Matrix room could not be joined; trying again';
const REFUSED = 'Matrix room could not be joined: the homeserver refused it; not tried again';
const GAVE_UP = 'Matrix room could not be joined; giving up (invite the bot again to retry)';
const CANCELLED = 'Matrix join retry cancelled: the listener stopped';
const ACCEPTED = 'Matrix invite accepted';
const NEW_ROOM = '!new:fake.test';

describe('Matrix: a failed join of an invited room is tried again', () => {
  let mx: FakeMatrix;
  let dir: string;
  let stop: AbortController;
  let lines: Line[];
  let failure: unknown;
  const delivered: ChannelMessage[] = [];
  const logged = (msg: string) => lines.filter((l) => l.msg === msg);

  /** Listening with auto_join on, invites from alice accepted; `joinRetryMs` the first retry's wait. */
  const listen = async (joinRetryMs: number) => {
    const l = listenInto(autoJoinAdapter(mx, { stateDir: dir, lines, rooms: [mx.groupRoom], joinRetryMs }), delivered, stop.signal, (err) => {
      failure = err;
    });
    // Past the fresh start's history sync: the invite comes in an incremental /sync, once.
    await waitFor(() => failure ?? (l.connected() && mx.callsOf('sync').length >= 2));
    expect(failure).toBeUndefined();
  };

  beforeEach(async () => {
    mx = await withMatrix();
    dir = withTempDir('matrix-join');
    stop = new AbortController();
    lines = [];
    failure = undefined;
    delivered.length = 0;
  });
  afterEach(() => stop.abort());

  it('a join that fails once with 502 is tried again: the room is joined and kept in m.direct', async () => {
    await listen(20);
    mx.fail('join', { status: 502 });
    mx.invite(NEW_ROOM, mx.alice, true);
    await waitFor(() => mx.joined(NEW_ROOM), 10_000);
    expect(mx.callsOf('join')).toHaveLength(2);
    expect(logged(RETRYING)).toMatchObject([{ level: 40, room: NEW_ROOM, attempt: 1, attempts: 5, retryInMs: 20, err: expect.stringContaining('502') }]);
    await waitFor(() => logged(ACCEPTED).length === 1);
    expect(logged(ACCEPTED)).toMatchObject([{ level: 30, room: NEW_ROOM, attempt: 2 }]);
    expect(mx.accountData('m.direct')).toEqual({ [mx.alice]: [mx.dmRoom, NEW_ROOM] });
    // Joined, the room is a direct chat like any other: its messages are delivered.
    mx.post(NEW_ROOM, { msgtype: 'm.text', body: 'hello from the new room' });
    await waitFor(() => failure ?? delivered.some((m) => m.text === 'hello from the new room'), 10_000);
    expect(failure).toBeUndefined();
  });

  it('a 429 is waited out as long as its retry_after_ms says, not the shorter backoff', async () => {
    await listen(20);
    mx.fail('join', { status: 429, retryAfterMs: 400 });
    mx.invite(NEW_ROOM, mx.alice, true);
    await waitFor(() => mx.joined(NEW_ROOM), 10_000);
    const [first, second] = mx.callsOf('join');
    expect(second!.at - first!.at).toBeGreaterThanOrEqual(400);
    expect(logged(RETRYING)).toMatchObject([{ room: NEW_ROOM, retryInMs: 400 }]);
  });

  it.each([
    { status: 403 as const, errcode: 'M_FORBIDDEN' },
    { status: 404 as const, errcode: 'M_NOT_FOUND' },
  ])('a permanent refusal ($status $errcode) is logged and not tried again', async (fault) => {
    await listen(20);
    mx.fail('join', fault);
    mx.invite(NEW_ROOM, mx.alice, true);
    await waitFor(() => logged(REFUSED).length === 1, 10_000);
    expect(logged(REFUSED)).toMatchObject([{ level: 40, room: NEW_ROOM, attempt: 1, err: expect.stringContaining(fault.errcode) }]);
    // The sync loop went on; no second attempt was planned.
    mx.dm('anyone?');
    await waitFor(() => failure ?? delivered.some((m) => m.text === 'anyone?'), 10_000);
    expect(failure).toBeUndefined();
    expect(logged(RETRYING)).toEqual([]);
    expect(mx.callsOf('join')).toHaveLength(1);
    expect(mx.joined(NEW_ROOM)).toBe(false);
  });

  it('gives up after 5 attempts, logged; a new invite of the room is acted on again', async () => {
    await listen(5);
    mx.fail('join', { status: 502 }, 5);
    mx.invite(NEW_ROOM, mx.alice, true);
    await waitFor(() => logged(GAVE_UP).length === 1, 10_000);
    expect(mx.callsOf('join')).toHaveLength(5);
    expect(logged(RETRYING).map((l) => [l.attempt, l.retryInMs])).toEqual([
      [1, 5],
      [2, 15],
      [3, 45],
      [4, 135],
    ]);
    expect(logged(GAVE_UP)).toMatchObject([{ level: 40, room: NEW_ROOM, attempts: 5 }]);
    expect(mx.joined(NEW_ROOM)).toBe(false);
    mx.invite(NEW_ROOM, mx.alice, true);
    await waitFor(() => mx.joined(NEW_ROOM), 10_000);
  });

  it('the sync loop does not wait for a retry, and stopping the listener cancels it', async () => {
    await listen(60_000);
    mx.fail('join', { status: 502 });
    mx.invite(NEW_ROOM, mx.alice, true);
    await waitFor(() => logged(RETRYING).length === 1, 10_000);
    // A minute to the next attempt: meanwhile messages are delivered.
    mx.dm('not blocked');
    await waitFor(() => failure ?? delivered.some((m) => m.text === 'not blocked'), 10_000);
    expect(failure).toBeUndefined();
    stop.abort();
    await waitFor(() => logged(CANCELLED).length === 1);
    expect(logged(CANCELLED)).toMatchObject([{ level: 30, room: NEW_ROOM }]);
    expect(mx.callsOf('join')).toHaveLength(1);
  });
  // The supervisor aborts a listener's signal only when it stops it: a listener that failed left
  // its retries running on a signal nothing would abort, and they joined the room later anyway.
  it('a listener that fails ends its retries: the room is not joined for a listener that is gone', async () => {
    await listen(60_000);
    mx.fail('join', { status: 502 });
    mx.invite(NEW_ROOM, mx.alice, true);
    await waitFor(() => logged(RETRYING).length === 1, 10_000);
    // The token is refused: the listener fails (not stopped: `stop` is never aborted).
    mx.fail('sync', { status: 401, errcode: 'M_UNKNOWN_TOKEN' });
    await waitFor(() => failure, 10_000);
    await waitFor(() => logged(CANCELLED).length === 1);
    expect(mx.callsOf('join')).toHaveLength(1);
  });
});
