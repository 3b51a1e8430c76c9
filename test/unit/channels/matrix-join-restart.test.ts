import { describe, expect, it } from 'vitest';
import { JOIN_ATTEMPTS } from '../../../channels/matrix/invites.js';
import type { MatrixFault } from '../../fakes/matrix/server.js';
import { waitFor } from '../../helpers/daemon.js';
import { ACCEPTED, GAVE_UP, matrixFixture, NEW_ROOM, REFUSED, RETRYING } from '../../helpers/matrix.js';

const RESUMED = 'Matrix join still owed from before; trying again';
const OTHER_ROOM = '!other:fake.test';

// A homeserver lists an invite in one incremental /sync only: a join still being retried when
// the listener ends must be taken up by the next one, or the room is never joined.
describe('Matrix: a join still owed when the listener ends is made by the next start', () => {
  const f = matrixFixture('matrix-join-restart');
  const { delivered, logged, stored } = f;
  const adapter = (joinRetryMs: number) => f.autoJoinAdapter(joinRetryMs);
  /** Listens until connected and past its first /sync (the fresh start's history one included); `stop()` aborts it and waits for the end. */
  const listen = f.listenSynced;
  /** The state a run left with `joins` owed, the position where the fake is now. */
  const storedOwing = (...joins: Array<{ roomId: string; attempts: number; nextAttemptAtMs?: number }>) =>
    f.store(`s${f.mx.position}`, { pendingJoins: joins.map((j) => ({ inviter: f.mx.alice, direct: true, ...j })) });

  /** An invite whose first join fails (502, or `fault`) with the next attempt a minute away, in a batch that is stored: the position is past it. */
  const owedJoin = async (fault: MatrixFault = { status: 502 }) => {
    f.mx.fail('join', fault);
    f.mx.invite(NEW_ROOM, f.mx.alice, true);
    await waitFor(() => logged(RETRYING).length === 1, 10_000);
    const invitedAt = f.mx.position;
    await waitFor(() => f.mx.syncedTo >= invitedAt, 10_000);
    expect(f.mx.callsOf('join')).toHaveLength(1);
    expect(f.mx.joined(NEW_ROOM)).toBe(false);
  };

  it('stopped and started again (same state dir): the room is joined and its messages delivered', async () => {
    const first = await listen(adapter(60_000));
    await owedJoin();
    await first.stop();

    // Another process on the same state dir, with a short backoff: the rest of the first one's
    // minute is waited for no longer than this one's longest step (135 ms). The homeserver takes joins again.
    await listen(adapter(5));
    await waitFor(() => f.mx.joined(NEW_ROOM), 10_000);
    await waitFor(() => logged(ACCEPTED).length === 1);
    expect(logged(ACCEPTED)).toMatchObject([{ room: NEW_ROOM, attempt: 2 }]);
    expect(f.mx.callsOf('join')).toHaveLength(2);
    // Recorded as a direct chat, so it is served like one.
    await waitFor(() => (f.mx.accountData('m.direct') as Record<string, string[]>)[f.mx.alice]?.includes(NEW_ROOM));
    f.mx.post(NEW_ROOM, { msgtype: 'm.text', body: 'hello after the restart' });
    await waitFor(() => delivered.some((m) => m.chat.id === NEW_ROOM && m.text === 'hello after the restart'), 10_000);
    // Joined: no longer owed.
    await waitFor(() => stored()?.pendingJoins?.length === 0);
  });

  it('a listener that fails and is started again on the same adapter joins the room', async () => {
    // A 429 asks for a minute; the backoff is short, and the listener started again waits no longer than its longest step (540 ms).
    const a = adapter(20);
    const first = await listen(a);
    await owedJoin({ status: 429, retryAfterMs: 60_000 });
    // The token is refused once: the listener fails (not stopped), which ends its retries.
    f.mx.fail('sync', { status: 401, errcode: 'M_UNKNOWN_TOKEN' });
    f.mx.dm('wake the long poll');
    await waitFor(() => first.done, 10_000);
    expect(first.failure).toBeDefined();
    expect(f.mx.joined(NEW_ROOM)).toBe(false);

    await listen(a);
    await waitFor(() => f.mx.joined(NEW_ROOM), 10_000);
    expect(f.mx.callsOf('join')).toHaveLength(2);
  });

  it('a join refused for good after a restart (403) is dropped: the start after that does not try it again', async () => {
    const first = await listen(adapter(60_000));
    await owedJoin();
    await first.stop();

    f.mx.fail('join', { status: 403, errcode: 'M_FORBIDDEN' });
    const second = await listen(adapter(5));
    await waitFor(() => logged(REFUSED).length === 1, 10_000);
    expect(logged(REFUSED)).toMatchObject([{ room: NEW_ROOM, attempt: 2 }]);
    await waitFor(() => stored()?.pendingJoins?.length === 0);
    await second.stop();

    await listen(adapter(60_000));
    // A whole /sync round later (a resumed join goes out before the first /sync): no third attempt.
    f.mx.dm('still there?');
    await waitFor(() => delivered.some((m) => m.text === 'still there?'), 10_000);
    expect(f.mx.callsOf('join')).toHaveLength(2);
    expect(f.mx.joined(NEW_ROOM)).toBe(false);
    expect(logged(RETRYING)).toHaveLength(1);
  });

  it('the attempt budget spans restarts: the last attempt failing gives up, and is not tried again', async () => {
    // Stored by a run that made 4 of the 5 attempts.
    storedOwing({ roomId: NEW_ROOM, attempts: 4 });
    f.mx.fail('join', { status: 502 });
    const first = await listen(adapter(5));
    await waitFor(() => logged(GAVE_UP).length === 1, 10_000);
    expect(logged(GAVE_UP)).toMatchObject([{ room: NEW_ROOM, attempts: 5 }]);
    await waitFor(() => stored()?.pendingJoins?.length === 0);
    await first.stop();

    await listen(adapter(5));
    f.mx.dm('anyone?');
    await waitFor(() => delivered.some((m) => m.text === 'anyone?'), 10_000);
    expect(f.mx.callsOf('join')).toHaveLength(1);
    expect(f.mx.joined(NEW_ROOM)).toBe(false);
  });

  it('a join no longer wanted (auto_join off meanwhile) is not made after a restart', async () => {
    const first = await listen(adapter(60_000));
    await owedJoin();
    await first.stop();

    const off = f.adapter({ allowFrom: [f.mx.alice] });
    await listen(off);
    f.mx.dm('off?');
    await waitFor(() => delivered.some((m) => m.text === 'off?'), 10_000);
    await waitFor(() => stored()?.pendingJoins?.length === 0);
    expect(f.mx.callsOf('join')).toHaveLength(1);
  });

  // Each join adds its room to m.direct by writing the whole content back: two written at once
  // each added their room to the same old content, and the later write dropped the other's.
  it('two direct joins taken up at once both end up in m.direct, and both rooms are served', async () => {
    storedOwing({ roomId: NEW_ROOM, attempts: 1 }, { roomId: OTHER_ROOM, attempts: 1 });
    // A slow homeserver (the start's read of m.direct, then the two writes): the writes would overlap.
    f.mx.fail('account_data', { delayMs: 300 }, 3);
    await listen(adapter(60_000));
    await waitFor(() => logged(ACCEPTED).length === 2, 10_000);
    expect(f.mx.callsOf('join')).toHaveLength(2);
    const direct = (f.mx.accountData('m.direct') as Record<string, string[]>)[f.mx.alice] ?? [];
    expect([...direct].sort()).toEqual([f.mx.dmRoom, NEW_ROOM, OTHER_ROOM].sort());
    f.mx.post(NEW_ROOM, { msgtype: 'm.text', body: 'in the first' });
    f.mx.post(OTHER_ROOM, { msgtype: 'm.text', body: 'in the second' });
    await waitFor(() => ['in the first', 'in the second'].every((t) => delivered.some((m) => m.text === t && m.chat.type === 'dm')), 10_000);
  });

  // The 5 attempts are meant to span minutes of backoff (a federation outage): a listener that
  // fails every few seconds, started again each time, must not spend them at once.
  it('a listener failing and started again quickly waits out the rest of the backoff each time', async () => {
    const a = adapter(60_000);
    let current = await listen(a);
    await owedJoin();
    // Every attempt would fail too.
    f.mx.fail('join', { status: 502 }, JOIN_ATTEMPTS);
    for (let i = 0; i < JOIN_ATTEMPTS; i++) {
      f.mx.fail('sync', { status: 500 });
      f.mx.dm(`wake ${i}`);
      await waitFor(() => current.done, 10_000);
      expect(current.failure).toBeDefined();
      current = await listen(a);
    }
    expect(logged(RESUMED)).toHaveLength(JOIN_ATTEMPTS);
    for (const line of logged(RESUMED)) expect(line).toMatchObject({ room: NEW_ROOM, attempts: 1, retryInMs: expect.any(Number) });
    expect(logged(RESUMED).every((l) => (l.retryInMs ?? 0) > 0)).toBe(true);
    expect(f.mx.callsOf('join')).toHaveLength(1);
    expect(logged(GAVE_UP)).toEqual([]);
    expect(stored()?.pendingJoins).toMatchObject([{ roomId: NEW_ROOM, attempts: 1 }]);
  });

  it('a due time further away than the longest backoff step (the clock set back) is waited for no longer than that', async () => {
    storedOwing({ roomId: NEW_ROOM, attempts: 1, nextAttemptAtMs: Date.now() + 86_400_000 });
    await listen(adapter(20));
    // The longest step: 20 ms × 3³.
    expect(logged(RESUMED)).toMatchObject([{ room: NEW_ROOM, attempts: 1, retryInMs: 540 }]);
    await waitFor(() => logged(ACCEPTED).length === 1, 10_000);
    expect(logged(ACCEPTED)).toMatchObject([{ room: NEW_ROOM, attempt: 2 }]);
    expect(f.mx.joined(NEW_ROOM)).toBe(true);
  });

  it('a join read back with its attempts spent is logged as given up, not dropped silently', async () => {
    storedOwing({ roomId: NEW_ROOM, attempts: JOIN_ATTEMPTS });
    await listen(adapter(5));
    expect(logged(GAVE_UP)).toMatchObject([{ level: 40, room: NEW_ROOM, attempts: JOIN_ATTEMPTS }]);
    await waitFor(() => stored()?.pendingJoins?.length === 0);
    expect(f.mx.callsOf('join')).toHaveLength(0);
    expect(f.mx.joined(NEW_ROOM)).toBe(false);
  });
});
