import { CodedError } from '../contracts/errors.js';
import type { ChannelMessage } from '../contracts/message.js';
import type { Logger } from '../observe/logger.js';
import type { Reminder, Reminders } from '../store/reminders.js';
import { runKeyedBatch } from './keyed-batch.js';
import { FIRING_PREFIX, reminderDefinition } from './reminder-commands.js';
import { defineComponent } from './services.js';

/** The longest single wait: a far reminder is looked at again after this (setTimeout's range is ~24 days). */
const MAX_WAIT_MS = 60_000;
/** Cluster mode: how often an instance looks for reminders another instance set (a cheap MIN over an index). */
const CLUSTER_RESCAN_MS = 3000;
/**
 * Cluster mode: how long a due reminder an instance took is left to it before another may fire
 * it. It covers a whole batch: its firings overlap (FIRING_CONCURRENCY) and each starts at the
 * latest once those before it finished, so the batch takes no longer than its firings one
 * after another (each an inbox write and two updates), far below this while storage takes
 * writes. A firing held for degraded storage may outlast it; its inbox key then makes another
 * instance's firing of it a duplicate.
 */
const CLAIM_MS = 60_000;
/**
 * After the store could not be read, or a firing could not be stored (its channel not known
 * yet, storage busy): the first retry; the waits double up to MAX_WAIT_MS.
 */
const RETRY_MS = 1000;
/**
 * A reminder whose channel the dispatcher does not know (a reload removed or renamed it, or it
 * has not started yet) is kept and tried again this long after it was due (after this start,
 * for one due while the daemon was down), in case the channel comes back; then it is given up.
 */
const UNKNOWN_CHANNEL_KEEP_MS = 86_400_000;
/** Firings handled per wake-up; the rest follow at once after. */
const BATCH = 50;
/**
 * Firings of a batch in flight at once. Each awaits its durable inbox write, which the inbox
 * group-commits, so firings started together share a commit instead of queueing one commit
 * each (500 reminders set for 09:00 reached the last user 500 commits late). Bounded so a
 * batch does not take all of the store's connections nor fill a degraded channel's hold at once.
 */
export const FIRING_CONCURRENCY = 16;

/** The inbox key of one firing: a reminder fires at most once per fire time, whoever tries. */
export const firingId = (r: Pick<Reminder, 'id' | 'fireAt'>): string => `reminder:${r.id}:${r.fireAt}`;

export interface ReminderSchedulerOptions {
  /** The longest wait between two looks at the store (shorter in cluster mode, where others add). */
  maxWaitMs?: number;
  /** Each firing: `fired` once stored, `skipped` when its sender is no longer allowed or its channel stayed unknown. */
  onFiring?: (outcome: 'fired' | 'skipped') => void;
  /** The first retry's wait (default RETRY_MS; tests shorten it). */
  retryMs?: number;
  /** How long a reminder whose channel is unknown is kept (default UNKNOWN_CHANNEL_KEEP_MS; tests shorten it). */
  unknownChannelKeepMs?: number;
}

/**
 * Fires due reminders: one timer for the soonest, never one per reminder. A firing is a
 * synthetic message stored through the dispatcher like any other (its inbox key is the
 * reminder id and fire time, so a retry after kill -9 finds it stored and adds nothing);
 * only then is the reminder marked fired. The stored item is answered by `reminderHook`.
 * A firing that cannot be stored is put off in the store (backoff), so the reminders after it
 * still fire and no wait is shorter than its backoff. A batch's firings overlap (up to
 * FIRING_CONCURRENCY), except a conversation's, which are stored one after the other in order.
 */
export class ReminderScheduler {
  readonly #store: Reminders;
  readonly #deliver: (msg: ChannelMessage) => Promise<boolean>;
  readonly #log: Logger;
  readonly #o: ReminderSchedulerOptions;
  #timer: NodeJS.Timeout | undefined;
  #running = false;
  #closed = false;
  readonly #firstRetryMs: number;
  #retryMs: number;
  #next: number | undefined;
  #pending = 0;
  /** Reminders due before this start count their failures from it (see #putOff). */
  readonly #startedAt = Date.now();

  constructor(store: Reminders, deliver: (msg: ChannelMessage) => Promise<boolean>, log: Logger, o: ReminderSchedulerOptions = {}) {
    this.#store = store;
    this.#deliver = deliver;
    this.#log = log;
    this.#o = o;
    this.#firstRetryMs = o.retryMs ?? RETRY_MS;
    this.#retryMs = this.#firstRetryMs;
  }

  /**
   * Re-arms the timer for the soonest reminder (after one was added or cancelled); with
   * `retryMs` (the store failed) no sooner than that, even for a reminder already due.
   */
  kick(retryMs?: number): void {
    if (this.#closed) return;
    void Promise.all([this.#store.nextFireAt(), this.#store.pendingCount()]).then(
      ([next, pending]) => {
        this.#next = next;
        this.#pending = pending;
        this.#arm(retryMs ?? (next === undefined ? undefined : Math.max(0, next - Date.now())));
      },
      (err: unknown) => {
        this.#log.warn({ err, retry_ms: this.#retryMs }, 'reading the next reminder failed; trying again');
        this.#arm(this.#retryMs);
      },
    );
  }

  #arm(waitMs: number | undefined): void {
    if (this.#closed) return;
    clearTimeout(this.#timer);
    const max = this.#o.maxWaitMs ?? MAX_WAIT_MS;
    // Without a reminder a single node has nothing to wait for; a cluster still looks for others'.
    if (waitMs === undefined && max === MAX_WAIT_MS) return;
    this.#timer = setTimeout(() => void this.#fireDue(), Math.min(waitMs ?? max, max));
  }

  /** The next firing and how many are pending, as last read (for /status). */
  status(): { pending: number; next_fire_at: string | null } {
    return { pending: this.#pending, next_fire_at: this.#next === undefined ? null : new Date(this.#next).toISOString() };
  }

  async #fireDue(): Promise<void> {
    if (this.#running || this.#closed) return;
    this.#running = true;
    let retry = false;
    try {
      const due = await this.#store.claimDue(Date.now(), BATCH, CLAIM_MS);
      // Refused because the daemon stops: these were not stored, so they are handed back.
      const refused = new Set<Reminder>();
      // After a refusal, a store failure or close() nothing more starts; the ones in flight
      // finish (fired, put off or refused: each exactly one), and all are awaited here.
      const { notStarted, failure } = await runKeyedBatch(due, {
        limit: FIRING_CONCURRENCY,
        keyOf: orderKey,
        go: () => refused.size === 0 && !this.#closed,
        run: async (r) => {
          if ((await this.#fireOne(r)) === 'stop') refused.add(r);
        },
      });
      if (refused.size) {
        const rest = new Set<Reminder>(notStarted);
        await this.#handBack(due.filter((r) => refused.has(r) || rest.has(r)));
        // Not at once: every firing would be refused again until close().
        retry = true;
      }
      if (failure) throw failure.err;
    } catch (err) {
      retry = true;
      this.#log.warn({ err, retry_ms: this.#retryMs }, 'the reminders could not be read or updated; trying again');
    } finally {
      this.#running = false;
    }
    if (retry) {
      this.kick(this.#retryMs);
      this.#retryMs = Math.min(this.#retryMs * 2, MAX_WAIT_MS);
    } else {
      this.#retryMs = this.#firstRetryMs;
      this.kick();
    }
  }

  /** Fires one due reminder; `stop` when the daemon no longer takes messages. A store failure throws. */
  async #fireOne(r: Reminder): Promise<'done' | 'stop'> {
    let stored: boolean;
    try {
      stored = await this.#deliver(firingMessage(r));
    } catch (err) {
      if (err instanceof CodedError && err.code === 'DAEMON_SHUTTING_DOWN') return 'stop';
      await this.#putOff(r, err);
      return 'done';
    }
    if (!stored) this.#log.warn({ reminder: r.id, channel: r.channelId }, 'a reminder firing was not taken (its sender is no longer allowed)');
    await this.#store.markFired(r.id);
    this.#o.onFiring?.(stored ? 'fired' : 'skipped');
    this.#log.info({ reminder: r.id, channel: r.channelId, scope: r.scope }, 'reminder fired');
    return 'done';
  }

  /**
   * A firing that could not be stored: the reminder is put off in the store, not retried at
   * once (it is due, so nothing else would wait) nor left in front of the ones after it.
   * Without a count kept anywhere the wait doubles: it is the first retry's plus as long as
   * the reminder has been failing (since due, or this start), at most MAX_WAIT_MS. One whose
   * channel stays unknown for UNKNOWN_CHANNEL_KEEP_MS is given up (marked fired).
   */
  async #putOff(r: Reminder, err: unknown): Promise<void> {
    const now = Date.now();
    const failingMs = Math.max(0, now - Math.max(r.fireAt, this.#startedAt));
    const unknown = err instanceof CodedError && err.code === 'CHANNEL_UNKNOWN';
    const fields = { err, reminder: r.id, channel: r.channelId, scope: r.scope };
    const keepMs = this.#o.unknownChannelKeepMs ?? UNKNOWN_CHANNEL_KEEP_MS;
    if (unknown && failingMs >= keepMs) {
      await this.#store.markFired(r.id);
      this.#o.onFiring?.('skipped');
      this.#log.error({ ...fields, kept_ms: keepMs }, 'a reminder was given up: its channel stayed unknown (removed or renamed by a reload)');
      return;
    }
    const waitMs = Math.min(failingMs + this.#firstRetryMs, MAX_WAIT_MS);
    await this.#store.defer(r.id, now + waitMs);
    // Warned while the waits grow; at the longest one (once a minute, maybe for a day) quieter.
    const level = waitMs < MAX_WAIT_MS ? 'warn' : 'debug';
    if (unknown) {
      const keepUntil = new Date(Math.max(r.fireAt, this.#startedAt) + keepMs).toISOString();
      this.#log[level]({ ...fields, retry_ms: waitMs, keep_until: keepUntil }, 'a reminder cannot fire: its channel is unknown; kept and tried again');
    } else this.#log[level]({ ...fields, retry_ms: waitMs }, 'a reminder could not fire yet; trying again');
  }

  /** Shutting down: the batch's rest is left due at once, so in a cluster another instance need not wait out the claim. */
  async #handBack(rest: readonly Reminder[]): Promise<void> {
    const now = Date.now();
    for (const r of rest) await this.#store.defer(r.id, now);
    this.#log.info({ reminders: rest.length }, 'the daemon is shutting down: due reminders are left for the next start or another instance');
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
  }
}

/**
 * Which firings are stored one after the other (in the batch's order: fire_at, id), so a
 * conversation's enter its inbox in order. The chat (and thread), not the scope stored when it
 * was set: a reload may have changed the channel's `scope` since, and every conversation lies
 * within one chat either way.
 */
const orderKey = (r: Reminder): string => JSON.stringify([r.channelId, r.chat.id, r.threadId ?? null]);

function firingMessage(r: Reminder): ChannelMessage {
  return {
    channelId: r.channelId,
    kind: r.kind,
    messageId: firingId(r),
    chat: r.chat,
    ...(r.threadId ? { threadId: r.threadId } : {}),
    sender: r.sender,
    text: `${FIRING_PREFIX}${r.text}`,
    attachments: [],
    addressed: true,
    receivedAt: Date.now(),
    synthetic: { kind: 'reminder', id: String(r.id) },
  };
}

/**
 * The `reminders` component: the store (SQLite, or PostgreSQL in cluster mode), one scheduler,
 * and the commands, the `schedule_message` tool and the firing hook added to every agent
 * through the `extensions` service.
 */
export const remindersComponent = defineComponent({
  name: 'reminders',
  inject: ['config', 'logger', 'metrics', 'dispatcher', 'extensions', 'reminders', 'status'],
  start: (ctx) => {
    const log = ctx.use('logger');
    const dispatcher = ctx.use('dispatcher');
    const metrics = ctx.use('metrics');
    const store = ctx.use('reminders');
    const scheduler = new ReminderScheduler(store, (msg) => dispatcher.deliver(msg), log, {
      ...(ctx.use('config').config.cluster ? { maxWaitMs: CLUSTER_RESCAN_MS } : {}),
      onFiring: (outcome) => metrics.firings.inc({ source: 'reminder', outcome }),
    });
    ctx.effect(() => scheduler.close());
    ctx.effect(
      ctx.use('extensions').add(
        'built-in',
        reminderDefinition(store, () => scheduler.kick()),
      ),
    );
    const status = ctx.use('status');
    status.reminders = () => scheduler.status();
    ctx.effect(() => {
      status.reminders = undefined;
    });
    scheduler.kick();
  },
});
