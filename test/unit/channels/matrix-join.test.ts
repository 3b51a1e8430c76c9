import { describe, expect, it } from 'vitest';
import { waitFor } from '../../helpers/daemon.js';
import { ACCEPTED, GAVE_UP, type MatrixRun, matrixFixture, NEW_ROOM, REFUSED, RETRYING } from '../../helpers/matrix.js';

const CANCELLED = 'Matrix join retry cancelled: the listener stopped';

describe('Matrix: a failed join of an invited room is tried again', () => {
  const f = matrixFixture('matrix-join');
  const { delivered, logged } = f;
  let run: MatrixRun;

  /** Listening with auto_join on, invites from alice accepted; `joinRetryMs` the first retry's wait. */
  const listen = async (joinRetryMs: number) => {
    // Past the fresh start's history sync: the invite comes in an incremental /sync, once.
    run = await f.listenSynced(f.autoJoinAdapter(joinRetryMs));
  };

  it('a join that fails once with 502 is tried again: the room is joined and kept in m.direct', async () => {
    await listen(20);
    f.mx.fail('join', { status: 502 });
    f.mx.invite(NEW_ROOM, f.mx.alice, true);
    await waitFor(() => f.mx.joined(NEW_ROOM), 10_000);
    expect(f.mx.callsOf('join')).toHaveLength(2);
    expect(logged(RETRYING)).toMatchObject([{ level: 40, room: NEW_ROOM, attempt: 1, attempts: 5, retryInMs: 20, err: expect.stringContaining('502') }]);
    await waitFor(() => logged(ACCEPTED).length === 1);
    expect(logged(ACCEPTED)).toMatchObject([{ level: 30, room: NEW_ROOM, attempt: 2 }]);
    expect(f.mx.accountData('m.direct')).toEqual({ [f.mx.alice]: [f.mx.dmRoom, NEW_ROOM] });
    // Joined, the room is a direct chat like any other: its messages are delivered.
    f.mx.post(NEW_ROOM, { msgtype: 'm.text', body: 'hello from the new room' });
    await waitFor(() => run.failure ?? delivered.some((m) => m.text === 'hello from the new room'), 10_000);
    expect(run.failure).toBeUndefined();
  });

  it('a 429 is waited out as long as its retry_after_ms says, not the shorter backoff', async () => {
    await listen(20);
    f.mx.fail('join', { status: 429, retryAfterMs: 400 });
    f.mx.invite(NEW_ROOM, f.mx.alice, true);
    await waitFor(() => f.mx.joined(NEW_ROOM), 10_000);
    const [first, second] = f.mx.callsOf('join');
    expect(second!.at - first!.at).toBeGreaterThanOrEqual(400);
    expect(logged(RETRYING)).toMatchObject([{ room: NEW_ROOM, retryInMs: 400 }]);
  });

  it.each([
    { status: 403 as const, errcode: 'M_FORBIDDEN' },
    { status: 404 as const, errcode: 'M_NOT_FOUND' },
  ])('a permanent refusal ($status $errcode) is logged and not tried again', async (fault) => {
    await listen(20);
    f.mx.fail('join', fault);
    f.mx.invite(NEW_ROOM, f.mx.alice, true);
    await waitFor(() => logged(REFUSED).length === 1, 10_000);
    expect(logged(REFUSED)).toMatchObject([{ level: 40, room: NEW_ROOM, attempt: 1, err: expect.stringContaining(fault.errcode) }]);
    // The sync loop went on; no second attempt was planned.
    f.mx.dm('anyone?');
    await waitFor(() => run.failure ?? delivered.some((m) => m.text === 'anyone?'), 10_000);
    expect(run.failure).toBeUndefined();
    expect(logged(RETRYING)).toEqual([]);
    expect(f.mx.callsOf('join')).toHaveLength(1);
    expect(f.mx.joined(NEW_ROOM)).toBe(false);
  });

  it('gives up after 5 attempts, logged; a new invite of the room is acted on again', async () => {
    await listen(5);
    f.mx.fail('join', { status: 502 }, 5);
    f.mx.invite(NEW_ROOM, f.mx.alice, true);
    await waitFor(() => logged(GAVE_UP).length === 1, 10_000);
    expect(f.mx.callsOf('join')).toHaveLength(5);
    expect(logged(RETRYING).map((l) => [l.attempt, l.retryInMs])).toEqual([
      [1, 5],
      [2, 15],
      [3, 45],
      [4, 135],
    ]);
    expect(logged(GAVE_UP)).toMatchObject([{ level: 40, room: NEW_ROOM, attempts: 5 }]);
    expect(f.mx.joined(NEW_ROOM)).toBe(false);
    f.mx.invite(NEW_ROOM, f.mx.alice, true);
    await waitFor(() => f.mx.joined(NEW_ROOM), 10_000);
  });

  it('the sync loop does not wait for a retry, and stopping the listener cancels it', async () => {
    await listen(60_000);
    f.mx.fail('join', { status: 502 });
    f.mx.invite(NEW_ROOM, f.mx.alice, true);
    await waitFor(() => logged(RETRYING).length === 1, 10_000);
    // A minute to the next attempt: meanwhile messages are delivered.
    f.mx.dm('not blocked');
    await waitFor(() => run.failure ?? delivered.some((m) => m.text === 'not blocked'), 10_000);
    expect(run.failure).toBeUndefined();
    f.stop.abort();
    await waitFor(() => logged(CANCELLED).length === 1);
    expect(logged(CANCELLED)).toMatchObject([{ level: 30, room: NEW_ROOM }]);
    expect(f.mx.callsOf('join')).toHaveLength(1);
  });
  // The supervisor aborts a listener's signal only when it stops it: a listener that failed left
  // its retries running on a signal nothing would abort, and they joined the room later anyway.
  it('a listener that fails ends its retries: the room is not joined for a listener that is gone', async () => {
    await listen(60_000);
    f.mx.fail('join', { status: 502 });
    f.mx.invite(NEW_ROOM, f.mx.alice, true);
    await waitFor(() => logged(RETRYING).length === 1, 10_000);
    // The token is refused: the listener fails (not stopped: `stop` is never aborted).
    f.mx.fail('sync', { status: 401, errcode: 'M_UNKNOWN_TOKEN' });
    await waitFor(() => run.failure, 10_000);
    await waitFor(() => logged(CANCELLED).length === 1);
    expect(f.mx.callsOf('join')).toHaveLength(1);
  });
});
