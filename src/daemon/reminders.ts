import type { ChannelMessage } from '../contracts/message.js';
import type { Logger } from '../observe/logger.js';
import type { Reminder, Reminders } from '../store/reminders.js';
import { FIRING_PREFIX, reminderDefinition } from './reminder-commands.js';
import { defineComponent } from './services.js';

/** The longest single wait: a far reminder is looked at again after this (setTimeout's range is ~24 days). */
const MAX_WAIT_MS = 60_000;
/** Cluster mode: how often an instance looks for reminders another instance set (a cheap MIN over an index). */
const CLUSTER_RESCAN_MS = 3000;
/** Cluster mode: how long a due reminder an instance took is left to it before another may fire it. */
const CLAIM_MS = 60_000;
/** After a firing could not be stored (its channel not running yet, storage busy): first retry, doubling up to MAX_WAIT_MS. */
const RETRY_MS = 1000;
/** Firings handled per wake-up; the rest follow at once after. */
const BATCH = 50;

/** The inbox key of one firing: a reminder fires at most once per fire time, whoever tries. */
export const firingId = (r: Pick<Reminder, 'id' | 'fireAt'>): string => `reminder:${r.id}:${r.fireAt}`;

export interface ReminderSchedulerOptions {
  /** The longest wait between two looks at the store (shorter in cluster mode, where others add). */
  maxWaitMs?: number;
  /** Each firing: `fired` once stored, `skipped` when its sender is no longer allowed. */
  onFiring?: (outcome: 'fired' | 'skipped') => void;
}

/**
 * Fires due reminders: one timer for the soonest, never one per reminder. A firing is a
 * synthetic message stored through the dispatcher like any other (its inbox key is the
 * reminder id and fire time, so a retry after kill -9 finds it stored and adds nothing);
 * only then is the reminder marked fired. The stored item is answered by `reminderHook`.
 */
export class ReminderScheduler {
  readonly #store: Reminders;
  readonly #deliver: (msg: ChannelMessage) => Promise<boolean>;
  readonly #log: Logger;
  readonly #o: ReminderSchedulerOptions;
  #timer: NodeJS.Timeout | undefined;
  #running = false;
  #closed = false;
  #retryMs = RETRY_MS;
  #next: number | undefined;
  #pending = 0;

  constructor(store: Reminders, deliver: (msg: ChannelMessage) => Promise<boolean>, log: Logger, o: ReminderSchedulerOptions = {}) {
    this.#store = store;
    this.#deliver = deliver;
    this.#log = log;
    this.#o = o;
  }

  /** Re-arms the timer for the soonest reminder (after one was added or cancelled). */
  kick(delayMs?: number): void {
    if (this.#closed) return;
    void Promise.all([this.#store.nextFireAt(), this.#store.pendingCount()]).then(
      ([next, pending]) => {
        this.#next = next;
        this.#pending = pending;
        this.#arm(next === undefined ? delayMs : Math.min(delayMs ?? Number.POSITIVE_INFINITY, Math.max(0, next - Date.now())));
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
      for (const r of due) {
        if (this.#closed) return;
        try {
          const stored = await this.#deliver(firingMessage(r));
          if (!stored) this.#log.warn({ reminder: r.id, channel: r.channelId }, 'a reminder firing was not taken (its sender is no longer allowed)');
          await this.#store.markFired(r.id);
          this.#o.onFiring?.(stored ? 'fired' : 'skipped');
          this.#log.info({ reminder: r.id, channel: r.channelId, scope: r.scope }, 'reminder fired');
        } catch (err) {
          retry = true;
          this.#log.warn({ err, reminder: r.id, channel: r.channelId, retry_ms: this.#retryMs }, 'a reminder could not fire yet; trying again');
          break;
        }
      }
    } catch (err) {
      retry = true;
      this.#log.warn({ err, retry_ms: this.#retryMs }, 'reading due reminders failed; trying again');
    } finally {
      this.#running = false;
    }
    if (retry) {
      this.kick(this.#retryMs);
      this.#retryMs = Math.min(this.#retryMs * 2, MAX_WAIT_MS);
    } else {
      this.#retryMs = RETRY_MS;
      this.kick();
    }
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
  }
}

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
