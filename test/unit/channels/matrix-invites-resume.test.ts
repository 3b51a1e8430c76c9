import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Invites, type InvitesOptions, type PendingJoin } from '../../../channels/matrix/invites.js';
import { ChannelError } from '../../../src/contracts/errors.js';
import { waitFor } from '../../helpers/daemon.js';
import { RETRYING } from '../../helpers/matrix.js';

/** The invites of a channel that auto-joins anyone's invites; `o` adds how it joins and logs. */
const invitesFor = (o: Pick<InvitesOptions, 'log' | 'accept'> & Partial<InvitesOptions>) =>
  new Invites({ id: 'mx', userId: '@bot:fake.test', rooms: [], autoJoin: true, allowFrom: ['*'], ...o });

// The joins a listener takes up again are stored before any is tried: stored one by one as
// each began, each write held only the joins begun so far, and a crash in between forgot the rest.
describe('Matrix invites: the joins owed from before, taken up by a listener', () => {
  it('are stored in one write holding them all, each attempt counted, before any is made', async () => {
    const stop = new AbortController();
    const attempted: string[] = [];
    const invites = invitesFor({
      log: pino({ level: 'silent' }),
      // An attempt still under way: it ends only with the listener.
      accept: (roomId, _invite, signal) => {
        attempted.push(roomId);
        return new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }));
      },
    });
    const joins: PendingJoin[] = ['!a:fake.test', '!b:fake.test', '!c:fake.test'].map((roomId) => ({
      roomId,
      inviter: '@alice:fake.test',
      direct: true,
      attempts: 1,
    }));
    const saves: PendingJoin[][] = [];
    try {
      invites.resume(joins, () => saves.push(invites.pending()), stop.signal);
      await waitFor(() => attempted.length === joins.length);
      expect(attempted).toEqual(joins.map((j) => j.roomId));
      for (const saved of saves) expect(saved).toMatchObject(joins.map((j) => ({ roomId: j.roomId, attempts: 2 })));
      // One write, not one per join (up to 50 at a start).
      expect(saves).toHaveLength(1);
    } finally {
      stop.abort();
      invites.listenEnded();
    }
  });

  // In an outage no batch is stored: a due time set only in memory was lost when the listener
  // failed, and the one started again read the earlier one (long past) and tried again at once.
  describe('a failed attempt stores when the next one is due, at once', () => {
    const T0 = Date.UTC(2026, 0, 1);
    afterEach(() => vi.useRealTimers());

    it.each([
      { what: 'a 502 an hour after the attempt began', err: new ChannelError('CHANNEL_UNAVAILABLE', '502'), failsAfterMs: 3_600_000, waitMs: 180_000 },
      {
        what: 'a 429 whose retry_after_ms is longer than the backoff',
        err: new ChannelError('CHANNEL_RATE_LIMITED', '429', { retryAfterMs: 600_000 }),
        failsAfterMs: 0,
        waitMs: 600_000,
      },
    ])('$what', async ({ err, failsAfterMs, waitMs }) => {
      // Only the clock is faked: the attempt fails at a time of the test's choosing; the wait after it outlasts the test.
      vi.useFakeTimers({ toFake: ['Date'] });
      vi.setSystemTime(T0);
      const stop = new AbortController();
      const lines: Array<{ msg: string }> = [];
      let attempts = 0;
      const invites = invitesFor({
        log: pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s)) }),
        // The backoff after the second attempt: 60 s × 3.
        joinRetryMs: 60_000,
        accept: async () => {
          attempts++;
          vi.setSystemTime(T0 + failsAfterMs);
          throw err;
        },
      });
      const saves: PendingJoin[][] = [];
      try {
        invites.resume([{ roomId: '!a:fake.test', inviter: '@alice:fake.test', direct: true, attempts: 1 }], () => saves.push(invites.pending()), stop.signal);
        await waitFor(() => lines.some((l) => l.msg === RETRYING));
        expect(attempts).toBe(1);
        expect(saves.at(-1)).toMatchObject([{ roomId: '!a:fake.test', attempts: 2, nextAttemptAtMs: T0 + failsAfterMs + waitMs }]);
      } finally {
        stop.abort();
        invites.listenEnded();
      }
    });
  });
});
