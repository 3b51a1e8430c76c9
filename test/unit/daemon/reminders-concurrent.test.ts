import { afterEach, describe, expect, it } from 'vitest';
import { CodedError } from '../../../src/contracts/errors.js';
import type { ChannelMessage } from '../../../src/contracts/message.js';
import { FIRING_PREFIX } from '../../../src/daemon/reminder-commands.js';
import { FIRING_CONCURRENCY, ReminderScheduler, type ReminderSchedulerOptions } from '../../../src/daemon/reminders.js';
import { openDb } from '../../../src/store/db.js';
import { type NewReminder, ReminderStore, type Reminders } from '../../../src/store/reminders.js';
import { quietLogger } from '../../helpers/cluster.js';
import { waitFor } from '../../helpers/daemon.js';

const RETRY_MS = 100;
const HAND_BACK = 'the daemon is shutting down: due reminders are left for the next start or another instance';
const STORE_FAILED = 'the reminders could not be read or updated; trying again';

/** A reminder in the direct chat `chat`, named by `text` (unique per test). */
const inChat = (chat: string, fireAt: number, text: string): NewReminder => ({
  scope: `tg:${chat}`,
  channelId: 'tg',
  chat: { id: chat, type: 'dm' },
  sender: { id: chat, name: 'Ada', isBot: false },
  kind: 'telegram',
  fireAt,
  text,
});

/** Lets every promise callback queued so far run (one turn of the event loop, no timer). */
const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * The dispatcher's deliver as the test drives it: each firing is held until the test stores
 * it (`store`) or refuses it because the daemon stops (`refuse`); with `auto` set, stored at once.
 */
class Deliveries {
  readonly held = new Map<string, { resolve: (stored: boolean) => void; reject: (err: unknown) => void }>();
  /** `start X`, `stored X`, `refused X`, in the order they happened. */
  readonly events: string[] = [];
  /** Each firing's inbox key, per delivery that was stored. */
  readonly stored: Array<{ text: string; messageId: string }> = [];
  calls = 0;
  maxInFlight = 0;
  auto = false;

  readonly deliver = (m: ChannelMessage): Promise<boolean> => {
    const text = m.text.slice(FIRING_PREFIX.length);
    this.calls++;
    this.events.push(`start ${text}`);
    const stored = () => {
      this.events.push(`stored ${text}`);
      this.stored.push({ text, messageId: m.messageId });
      return true;
    };
    if (this.auto) return Promise.resolve(stored());
    return new Promise((resolve, reject) => {
      this.held.set(text, { resolve: () => resolve(stored()), reject });
      this.maxInFlight = Math.max(this.maxInFlight, this.held.size);
    });
  };

  store(text: string): void {
    this.#take(text).resolve(true);
  }

  refuse(text: string): void {
    this.events.push(`refused ${text}`);
    this.#take(text).reject(new CodedError('DAEMON_SHUTTING_DOWN', 'channel "tg" is not taking messages', { retryable: true }));
  }

  /** How many times the firing `text` was stored. */
  storedCount(text: string): number {
    return this.stored.filter((s) => s.text === text).length;
  }

  #take(text: string) {
    const h = this.held.get(text);
    if (!h) throw new Error(`no delivery of "${text}" is held (held: ${[...this.held.keys()].join(', ')})`);
    this.held.delete(text);
    return h;
  }
}

describe('ReminderScheduler: a batch fires concurrently, bounded, each conversation in order (SQLite)', () => {
  const scheds: ReminderScheduler[] = [];
  afterEach(() => {
    for (const s of scheds.splice(0)) s.close();
  });
  const open = () => {
    const db = openDb(':memory:');
    const store: Reminders = new ReminderStore(db);
    return { db, store };
  };
  const start = (store: Reminders, d: Deliveries, o: ReminderSchedulerOptions = {}) => {
    const { log, sink } = quietLogger();
    const outcomes: string[] = [];
    const s = new ReminderScheduler(store, d.deliver, log, { retryMs: RETRY_MS, onFiring: (x) => outcomes.push(x), ...o });
    scheds.push(s);
    s.kick();
    return { s, sink, outcomes };
  };
  /** `n` reminders in chats c0…c(n-1), due in that order; their texts. */
  const addEach = async (store: Reminders, n: number, due: number): Promise<string[]> => {
    const texts = Array.from({ length: n }, (_, i) => `c${i}`);
    for (const [i, t] of texts.entries()) await store.add(inChat(t, due + i, t), 20);
    return texts;
  };

  it('firings of different conversations are in flight together, up to the bound and never past it', async () => {
    const { store } = open();
    const texts = await addEach(store, FIRING_CONCURRENCY + 4, Date.now() - 1000);
    const d = new Deliveries();
    const { outcomes } = start(store, d);
    // All that may start do so at once: the bound, and the batch's oldest first.
    await waitFor(() => d.held.size === FIRING_CONCURRENCY);
    expect(d.calls).toBe(FIRING_CONCURRENCY);
    expect([...d.held.keys()]).toEqual(texts.slice(0, FIRING_CONCURRENCY));
    // Each stored firing frees one place, taken by the next due; never more in flight.
    for (const [i, t] of texts.entries()) {
      d.store(t);
      await waitFor(() => outcomes.length === i + 1);
      const left = texts.length - i - 1;
      await waitFor(() => d.held.size === Math.min(FIRING_CONCURRENCY, left));
    }
    expect(d.maxInFlight).toBe(FIRING_CONCURRENCY);
    expect(outcomes).toEqual(texts.map(() => 'fired'));
    expect(texts.map((t) => d.storedCount(t))).toEqual(texts.map(() => 1));
    expect(await store.pendingCount()).toBe(0);
  });

  it("two reminders of one conversation are stored in order: the second starts once the first's was stored and marked", async () => {
    const { store } = open();
    const due = Date.now() - 1000;
    await store.add(inChat('same', due, 'first'), 20);
    await store.add(inChat('a', due + 1, 'a'), 20);
    await store.add(inChat('same', due + 2, 'second'), 20);
    await store.add(inChat('b', due + 3, 'b'), 20);
    const d = new Deliveries();
    const { outcomes } = start(store, d);
    await waitFor(() => d.held.size === 3);
    expect([...d.held.keys()]).toEqual(['first', 'a', 'b']);
    // Other conversations' firings finishing do not let the second pass the first.
    d.store('a');
    d.store('b');
    await waitFor(() => outcomes.length === 2);
    await tick();
    expect(d.held.has('second')).toBe(false);
    d.store('first');
    await waitFor(() => d.held.has('second'));
    const startSecond = d.events.indexOf('start second');
    expect(d.events.indexOf('stored first')).toBeLessThan(startSecond);
    // Marked fired before the second started: only the second is pending in that conversation.
    expect((await store.pending('tg:same')).map((r) => r.text)).toEqual(['second']);
    d.store('second');
    await waitFor(() => outcomes.length === 4);
    expect(d.stored.map((s) => s.text)).toEqual(['a', 'b', 'first', 'second']);
    expect(await store.pendingCount()).toBe(0);
  });

  it('a shutdown with firings in flight: each reminder is fired once or left pending for the next start, never both, none lost', async () => {
    const { db, store } = open();
    const due = Date.now() - 1000;
    // 18 conversations; c0 and c1 have a second reminder, due after the rest.
    const texts = await addEach(store, FIRING_CONCURRENCY + 2, due);
    await store.add(inChat('c0', due + 100, 'c0 again'), 20);
    await store.add(inChat('c1', due + 101, 'c1 again'), 20);
    const d = new Deliveries();
    // No retry within the test: it would only be refused and handed back again.
    const first = start(store, d, { retryMs: 60_000 });
    await waitFor(() => d.held.size === FIRING_CONCURRENCY);
    // The stop comes: one firing is refused. Of those in flight, some were stored, the rest refused.
    d.refuse('c2');
    await tick();
    const stored = ['c0', 'c1', 'c3', 'c4', 'c5', 'c6', 'c7', 'c8'];
    for (const t of stored) d.store(t);
    const refused = texts.slice(9, FIRING_CONCURRENCY);
    for (const t of refused) d.refuse(t);
    const handBack = await waitFor(() => first.sink.entries().find((l) => l.msg === HAND_BACK));
    // Every firing in flight settled before the hand-back; nothing started after the stop,
    // though places were free and c0's and c1's firings were stored.
    expect(handBack.reminders).toBe(20 - stored.length);
    expect(d.calls).toBe(FIRING_CONCURRENCY);
    expect(first.outcomes).toEqual(stored.map(() => 'fired'));
    const rows = db.prepare('SELECT text, state, retry_at FROM reminders ORDER BY id').all() as Array<{ text: string; state: string; retry_at: number }>;
    expect(rows.filter((r) => r.state === 'fired').map((r) => r.text)).toEqual(stored);
    const pending = rows.filter((r) => r.state === 'pending');
    expect(pending.map((r) => r.text).sort()).toEqual(['c2', ...refused, 'c16', 'c17', 'c0 again', 'c1 again'].sort());
    // Handed back due at once, for the next start (or another instance) to take without waiting.
    for (const r of pending) expect(r.retry_at).toBeLessThanOrEqual(Date.now());
    first.s.close();

    // The next start fires the ones left, and only those.
    const next = new Deliveries();
    next.auto = true;
    start(store, next);
    await waitFor(async () => (await store.pendingCount()) === 0);
    for (const t of [...texts, 'c0 again', 'c1 again']) expect(d.storedCount(t) + next.storedCount(t)).toBe(1);
    expect(next.events.indexOf('stored c0')).toBe(-1);
  });

  it('a store failure in the middle: nothing more starts, those in flight finish, then the scheduler tries again after the backoff', async () => {
    const { store } = open();
    const due = Date.now() - 1000;
    await store.add(inChat('a', due, 'a'), 20);
    await store.add(inChat('b', due + 1, 'b'), 20);
    await store.add(inChat('c', due + 2, 'c'), 20);
    await store.add(inChat('b', due + 3, 'b again'), 20);
    const [a] = (await store.pending('tg:a')).map((r) => r.id);
    const claims: number[] = [];
    let failedAt: number | undefined;
    // The store's own answers, but marking `a` fired fails once (a busy database).
    const failing: Reminders = {
      add: (r, max) => store.add(r, max),
      pending: (scope) => store.pending(scope),
      cancel: (scope, id) => store.cancel(scope, id),
      defer: (id, until) => store.defer(id, until),
      nextFireAt: () => store.nextFireAt(),
      pendingCount: () => store.pendingCount(),
      markFired: async (id) => {
        if (id === a && failedAt === undefined) {
          failedAt = Date.now();
          throw new CodedError('STORAGE_UNAVAILABLE', 'busy');
        }
        return store.markFired(id);
      },
      claimDue: (now, limit, claimMs) => {
        claims.push(Date.now());
        return store.claimDue(now, limit, claimMs);
      },
    };
    const d = new Deliveries();
    const { sink, outcomes } = start(failing, d);
    await waitFor(() => d.held.size === 3);
    d.store('a');
    await waitFor(() => failedAt !== undefined);
    await tick();
    // The batch waits for the firings it started before it gives up.
    const failed = () => sink.entries().filter((l) => l.msg === STORE_FAILED);
    expect(failed()).toHaveLength(0);
    d.store('b');
    await waitFor(() => outcomes.length === 1);
    await tick();
    // b's conversation is free again, but after the failure nothing more starts.
    expect(d.calls).toBe(3);
    d.auto = true;
    d.store('c');
    await waitFor(() => failed().length === 1);
    expect(failed()[0]).toMatchObject({ level: 40, retry_ms: RETRY_MS });
    // The retry: a claimed again after the backoff, and stored under the same inbox key (a duplicate the inbox drops).
    await waitFor(async () => (await store.pendingCount()) === 0);
    expect(claims.length).toBeGreaterThanOrEqual(2);
    expect(claims[1]! - failedAt!).toBeGreaterThanOrEqual(RETRY_MS - 5);
    const ofA = d.stored.filter((s) => s.text === 'a').map((s) => s.messageId);
    expect(ofA).toHaveLength(2);
    expect(ofA[1]).toBe(ofA[0]);
    expect(d.stored.map((s) => s.text).filter((t) => t !== 'a')).toEqual(['b', 'c', 'b again']);
  });

  it('close() starts no more firings; those in flight finish', async () => {
    const { store } = open();
    const texts = await addEach(store, FIRING_CONCURRENCY + 4, Date.now() - 1000);
    const d = new Deliveries();
    const { s, outcomes } = start(store, d);
    await waitFor(() => d.held.size === FIRING_CONCURRENCY);
    s.close();
    for (const t of texts.slice(0, FIRING_CONCURRENCY)) d.store(t);
    await waitFor(() => outcomes.length === FIRING_CONCURRENCY);
    await tick();
    expect(d.calls).toBe(FIRING_CONCURRENCY);
    expect(await store.pendingCount()).toBe(4);
  });
});
