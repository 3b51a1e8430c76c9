import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { Invites, type PendingJoin } from '../../../channels/matrix/invites.js';
import { waitFor } from '../../helpers/daemon.js';

// The joins a listener takes up again are stored before any is tried: stored one by one as
// each began, each write held only the joins begun so far, and a crash in between forgot the rest.
describe('Matrix invites: the joins owed from before, taken up by a listener', () => {
  it('are stored in one write holding them all, each attempt counted, before any is made', async () => {
    const stop = new AbortController();
    const attempted: string[] = [];
    const invites = new Invites({
      id: 'mx',
      userId: '@bot:fake.test',
      rooms: [],
      autoJoin: true,
      allowFrom: ['*'],
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
});
