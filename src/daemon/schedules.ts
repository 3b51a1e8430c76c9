import { Cron } from 'croner';
import { Gauge } from 'prom-client';
import { CRON_MODE, type ScheduleConfig } from '../config/schedules.js';
import { CodedError, isRetryable } from '../contracts/errors.js';
import type { ChannelMessage } from '../contracts/message.js';
import { sleep } from '../util/abortable.js';
import type { Logger } from '../observe/logger.js';
import { defineComponent } from './services.js';

/** How often the component looks for a reloaded config (the live config's generation). */
const RELOAD_POLL_MS = 1000;

/** A firing that could not be stored is tried again after this, doubling, FIRE_RETRY_ATTEMPTS times in all (about a minute). */
const FIRE_RETRY_MS = 1000;
const FIRE_RETRY_ATTEMPTS = 7;

/** The inbox key of one firing: the same on every instance, so the inbox keeps it once. */
export const scheduleFiringId = (id: string, fireAtMs: number): string => `schedule:${id}:${fireAtMs}`;

/**
 * The scheduled time of the latest firing at or before `atMs`: what a live firing and a
 * catch-up are both keyed on. Not croner's `currentRun()`, the clock time its timer ran
 * (without a timezone a few ms past the second, differing per instance and from the
 * catch-up's whole second), nor that time floored (a timer late past the second would name
 * the next one). `previousRuns` counts a run strictly before its reference, hence the 1 ms.
 */
export const scheduledAt = (cron: Cron, atMs: number): number | undefined => cron.previousRuns(1, new Date(atMs + 1))[0]?.getTime();

interface Job {
  /** The table as configured: a change restarts the job. */
  key: string;
  config: ScheduleConfig;
  cron: Cron;
}

/**
 * Runs `[[schedules]]`: one croner job per schedule, kept in step with the config by id
 * (added, removed, or restarted when its table changed). A firing is a synthetic message
 * with the schedule's prompt, stored through the dispatcher under `schedule:ID:FIRE_AT`
 * (the scheduled time, not the clock): every instance of a cluster computes the same key,
 * so the shared inbox keeps one item and one turn runs, wherever it was fired from.
 */
export class ScheduleRunner {
  readonly #jobs = new Map<string, Job>();
  readonly #deliver: (msg: ChannelMessage) => Promise<boolean>;
  readonly #log: Logger;
  readonly #onNext: (id: string, nextMs: number | undefined) => void;
  readonly #onFiring: (outcome: 'fired' | 'caught_up' | 'skipped') => void;
  readonly #retryMs: number;
  readonly #closed = new AbortController();

  constructor(
    deliver: (msg: ChannelMessage) => Promise<boolean>,
    log: Logger,
    onNext: (id: string, nextMs: number | undefined) => void,
    onFiring: (outcome: 'fired' | 'caught_up' | 'skipped') => void = () => {},
    retryMs = FIRE_RETRY_MS,
  ) {
    this.#deliver = deliver;
    this.#log = log;
    this.#onNext = onNext;
    this.#onFiring = onFiring;
    this.#retryMs = retryMs;
  }

  /** Brings the jobs in line with `list`; `catchUpWithinMs` bounds how old a missed firing `catch_up = "last"` may run. */
  apply(list: readonly ScheduleConfig[], catchUpWithinMs: number): void {
    const wanted = new Map(list.map((s) => [s.id, s]));
    for (const [id, job] of this.#jobs) {
      const next = wanted.get(id);
      if (next && JSON.stringify(next) === job.key) continue;
      job.cron.stop();
      this.#jobs.delete(id);
      this.#onNext(id, undefined);
    }
    for (const s of list) {
      if (this.#jobs.has(s.id)) continue;
      const cron = new Cron(
        s.cron,
        {
          name: `schedule:${s.id}`,
          mode: CRON_MODE,
          protect: true,
          ...(s.timezone ? { timezone: s.timezone } : {}),
          catch: (err) => this.#log.error({ err, schedule: s.id }, 'a schedule firing failed'),
        },
        (self: Cron) => {
          // croner runs this once the clock reached the firing's time, so one is at or before now.
          const at = scheduledAt(self, Date.now()) ?? Date.now();
          void this.#fire(s, at).finally(() => this.#onNext(s.id, self.nextRun()?.getTime()));
        },
      );
      this.#jobs.set(s.id, { key: JSON.stringify(s), config: s, cron });
      this.#onNext(s.id, cron.nextRun()?.getTime());
      if (s.catch_up === 'last') {
        const last = scheduledAt(cron, Date.now());
        // Stored already when it ran (or was caught up) before: the inbox drops it as a duplicate.
        if (last !== undefined && Date.now() - last <= catchUpWithinMs) void this.#fire(s, last, true);
      }
    }
  }

  async #fire(s: ScheduleConfig, atMs: number, catchUp = false): Promise<void> {
    const msg: ChannelMessage = {
      channelId: s.channel,
      kind: 'schedule',
      messageId: scheduleFiringId(s.id, atMs),
      chat: { id: s.chat, type: 'dm' },
      sender: { id: `schedule:${s.id}`, name: `schedule ${s.id}`, isBot: false },
      text: s.prompt,
      attachments: [],
      addressed: true,
      // The firing's own time, also for a catch-up: how long it may wait to be stored counts
      // from it (src/dispatch/hold.ts), as other instances published it then.
      receivedAt: atMs,
      synthetic: { kind: 'schedule', id: s.id, ...(s.agent ? { agent: s.agent } : {}) },
    };
    // Its channel not registered yet (a firing or catch-up at start, a reload adding both) or the
    // store away for a moment: tried again, doubling, for FIRE_RETRY_ATTEMPTS; then skipped.
    for (let attempt = 1; ; attempt++) {
      try {
        await this.#deliver(msg);
        this.#onFiring(catchUp ? 'caught_up' : 'fired');
        this.#log.info({ schedule: s.id, channel: s.channel, fire_at: new Date(atMs).toISOString() }, 'schedule fired');
        return;
      } catch (err) {
        const again =
          attempt < FIRE_RETRY_ATTEMPTS && !this.#closed.signal.aborted && (isRetryable(err) || (err instanceof CodedError && err.code === 'CHANNEL_UNKNOWN'));
        if (again) await sleep(this.#retryMs * 2 ** (attempt - 1), this.#closed.signal);
        if (again && !this.#closed.signal.aborted) continue;
        this.#onFiring('skipped');
        this.#log.warn({ err, schedule: s.id, channel: s.channel, attempts: attempt }, 'a schedule firing could not be stored; it is skipped');
        return;
      }
    }
  }

  /** Each schedule's next firing (ms since the epoch), for /status. */
  next(): Array<{ id: string; next_fire_at: string | null }> {
    return [...this.#jobs.values()].map((j) => ({ id: j.config.id, next_fire_at: j.cron.nextRun()?.toISOString() ?? null }));
  }

  close(): void {
    this.#closed.abort();
    for (const j of this.#jobs.values()) j.cron.stop();
    this.#jobs.clear();
  }
}

/** The `schedules` component: `[[schedules]]` as croner jobs, re-applied when a reload changes the config. */
export const schedulesComponent = defineComponent({
  name: 'schedules',
  inject: ['config', 'logger', 'metrics', 'dispatcher', 'topology'],
  start: (ctx) => {
    const live = ctx.use('config');
    const dispatcher = ctx.use('dispatcher');
    const metrics = ctx.use('metrics');
    const gauge = new Gauge({
      name: 'channeld_schedule_next_fire_timestamp_seconds',
      help: 'When each [[schedules]] entry fires next (unix seconds)',
      labelNames: ['schedule'],
      registers: [metrics.registry],
    });
    ctx.effect(() => metrics.registry.removeSingleMetric('channeld_schedule_next_fire_timestamp_seconds'));
    const runner = new ScheduleRunner(
      (msg) => dispatcher.deliver(msg),
      ctx.use('logger'),
      (id, next) => (next === undefined ? gauge.remove({ schedule: id }) : gauge.set({ schedule: id }, Math.round(next / 1000))),
      (outcome) => metrics.firings.inc({ source: 'schedule', outcome }),
    );
    ctx.effect(() => runner.close());
    // How old a missed firing catch_up = "last" may run: only while the inbox still drops it
    // as a repeat (one node: inbox_retention_hours; cluster: inside the stream's duplicate
    // window), or a catch-up could run a second turn.
    const intake = ctx.use('topology').intake;
    const retentionMs = () => intake.duplicateWindowMs();
    let generation = live.generation;
    runner.apply(live.config.schedules, retentionMs());
    // A reload replaces the live config; its schedules are diffed by id like channels.
    const poll = setInterval(() => {
      if (live.generation === generation) return;
      generation = live.generation;
      runner.apply(live.config.schedules, retentionMs());
    }, RELOAD_POLL_MS);
    poll.unref();
    ctx.effect(() => clearInterval(poll));
  },
});
