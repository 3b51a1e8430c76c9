import { afterEach, describe, expect, it } from 'vitest';
import { PgReminderStore } from '../../../src/cluster/pg-reminders.js';
import { PgWriter } from '../../../src/cluster/pg-writer.js';
import { CodedError } from '../../../src/contracts/errors.js';
import type { ChannelMessage } from '../../../src/contracts/message.js';
import { ReminderScheduler, type ReminderSchedulerOptions } from '../../../src/daemon/reminders.js';
import { openDb } from '../../../src/store/db.js';
import { type NewReminder, ReminderStore, type Reminders } from '../../../src/store/reminders.js';
import { clusterSkipReason, quietLogger } from '../../helpers/cluster.js';
import { waitFor } from '../../helpers/daemon.js';
import { migratedPools } from '../../helpers/pg-schemas.js';

const reminder = (channelId: string, fireAt: number, text: string): NewReminder => ({
  scope: `${channelId}:42`,
  channelId,
  chat: { id: '42', type: 'dm' },
  sender: { id: '42', name: 'Ada', isBot: false },
  kind: 'telegram',
  fireAt,
  text,
});

/** What Dispatcher.deliver throws for a channel a reload removed or renamed (or not started yet). */
const unknownChannel = () => new CodedError('CHANNEL_UNKNOWN', 'channel "gone" is not taking messages: the dispatcher does not know it');

const RETRY_MS = 100;

/** The same cases for both stores: the scheduler's handling of a firing that cannot be stored. */
function cases(name: string, open: () => Promise<Reminders>) {
  describe(`ReminderScheduler on ${name}: a firing that cannot be stored`, () => {
    const scheds: ReminderScheduler[] = [];
    afterEach(() => {
      for (const s of scheds.splice(0)) s.close();
    });
    const start = (store: Reminders, deliver: (m: ChannelMessage) => Promise<boolean>, o: ReminderSchedulerOptions = {}) => {
      const { log, sink } = quietLogger();
      const s = new ReminderScheduler(store, deliver, log, { retryMs: RETRY_MS, ...o });
      scheds.push(s);
      s.kick();
      return sink;
    };

    it('a reminder whose channel is unknown is put off with growing waits, and the ones due after it (same batch) fire at once', async () => {
      const store = await open();
      const now = Date.now();
      await store.add(reminder('gone', now - 1000, 'old channel'), 20);
      await store.add(reminder('tg', now - 500, 'stand up'), 20);
      await store.add(reminder('tg', now - 400, 'sit down'), 20);
      const tries: number[] = [];
      const delivered: string[] = [];
      const sink = start(store, async (m) => {
        if (m.channelId === 'gone') {
          tries.push(Date.now());
          throw unknownChannel();
        }
        delivered.push(m.text);
        return true;
      });
      await waitFor(() => tries.length >= 4, 10_000, 5);
      // Fired in the first pass, not after the failing one's retries (nor a lapsed claim's 60 s).
      expect(delivered).toEqual(['Reminder: stand up', 'Reminder: sit down']);
      expect(await store.pendingCount()).toBe(1);
      // Each wait at least the first retry's, doubling: 100, 200, 400 ms.
      const gaps = tries.slice(1, 4).map((t, i) => t - tries[i]!);
      for (const [i, g] of gaps.entries()) expect(g).toBeGreaterThanOrEqual(2 ** i * RETRY_MS - 5);
      expect(tries[3]! - tries[0]!).toBeGreaterThanOrEqual(7 * RETRY_MS - 15);
      const lines = sink.entries().filter((l) => l.msg === 'a reminder cannot fire: its channel is unknown; kept and tried again');
      expect(lines.length).toBeGreaterThanOrEqual(3);
      expect(lines[0]).toMatchObject({ level: 40, channel: 'gone' });
      expect(lines[0]!.retry_ms).toBeGreaterThanOrEqual(RETRY_MS);
      expect(typeof lines[0]!.keep_until).toBe('string');
    });

    it('one whose channel stays unknown past its keep is given up: marked done, counted skipped, logged as an error', async () => {
      const store = await open();
      await store.add(reminder('gone', Date.now() - 1000, 'old channel'), 20);
      const outcomes: string[] = [];
      let tries = 0;
      const sink = start(
        store,
        async () => {
          tries++;
          throw unknownChannel();
        },
        { unknownChannelKeepMs: 250, onFiring: (o) => outcomes.push(o) },
      );
      // Counted once markFired resolved: a read of the store may see the mark a moment sooner.
      await waitFor(() => outcomes.length > 0, 10_000);
      expect(outcomes).toEqual(['skipped']);
      expect(await store.pendingCount()).toBe(0);
      expect(
        sink
          .entries()
          .filter((l) => l.level === 50)
          .map((l) => l.msg),
      ).toEqual(['a reminder was given up: its channel stayed unknown (removed or renamed by a reload)']);
      // Tried at 0, 100 and 300 ms: the third finds it failing past 250 ms.
      expect(tries).toBeLessThanOrEqual(4);
      expect(await store.nextFireAt()).toBeUndefined();
    });

    it('a store that cannot be read is read again after the backoff, not at once for a reminder already due', async () => {
      const store = await open();
      await store.add(reminder('tg', Date.now() - 1000, 'stand up'), 20);
      // The store's own answers, but its claims refused three times (a busy database).
      const claims: number[] = [];
      const failing: Reminders = {
        add: (r, max) => store.add(r, max),
        pending: (scope) => store.pending(scope),
        cancel: (scope, id) => store.cancel(scope, id),
        defer: (id, until) => store.defer(id, until),
        nextFireAt: () => store.nextFireAt(),
        pendingCount: () => store.pendingCount(),
        markFired: (id) => store.markFired(id),
        claimDue: async (now, limit, claimMs) => {
          claims.push(Date.now());
          if (claims.length <= 3) throw new CodedError('STORAGE_UNAVAILABLE', 'busy');
          return store.claimDue(now, limit, claimMs);
        },
      };
      const delivered: string[] = [];
      start(failing, async (m) => {
        delivered.push(m.text);
        return true;
      });
      await waitFor(() => delivered.length === 1, 10_000);
      // 100, 200, 400 ms between the claims.
      expect(claims).toHaveLength(4);
      expect(claims[3]! - claims[0]!).toBeGreaterThanOrEqual(7 * RETRY_MS - 15);
    });
  });
}

cases('SQLite', async () => new ReminderStore(openDb(':memory:')));

const skip = await clusterSkipReason();
const pgPool = migratedPools();
if (skip === undefined) cases('PostgreSQL', async () => new PgReminderStore(new PgWriter(await pgPool(4), quietLogger().log)));
else describe.skip(`ReminderScheduler on PostgreSQL (skipped: ${skip})`, () => it('needs PostgreSQL', () => {}));
