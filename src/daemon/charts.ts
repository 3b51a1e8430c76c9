import { chartReport, type ChartSource } from '../observe/chart-report.js';
import { MINUTE_MS, minuteOf, RING_MINUTES } from '../observe/minute-figures.js';
import { MinuteRing } from '../observe/minute-ring.js';
import { defineComponent } from './services.js';

/** The timer's sample is taken this long before a minute ends, so what the minute counted stays in it. */
const BEFORE_MINUTE_END_MS = 5;

/**
 * Samples the metrics into the minute ring at every minute's end and writes the changed
 * minutes to the store (SQLite, or PostgreSQL in cluster mode), so the charts survive a
 * restart; a read samples first, so the current minute is up to date.
 */
export const chartsComponent = defineComponent({
  name: 'charts',
  provides: ['charts'],
  inject: ['metrics', 'minutes', 'logger'],
  start: async (ctx) => {
    const store = ctx.use('minutes');
    const log = ctx.use('logger');
    const ring = new MinuteRing(ctx.use('metrics'));
    const since = () => minuteOf(Date.now()) - RING_MINUTES + 1;
    try {
      ring.load(await store.own(since()));
    } catch (err) {
      // The charts start empty rather than the daemon not at all.
      log.warn({ err }, 'the stored chart minutes could not be read; the charts start empty');
    }
    await ring.sample();
    const save = async () => {
      await ring.sample();
      const rows = ring.takeDirty();
      if (!rows.length) return;
      try {
        await store.write(rows, since());
      } catch (err) {
        ring.redo(rows);
        log.warn({ err }, 'chart minutes could not be stored; tried again next minute');
      }
    };
    let timer: NodeJS.Timeout | undefined;
    let stopped = false;
    // Each minute's samples are taken just before its end, so what it counted stays in it.
    const schedule = () => {
      if (stopped) return;
      const now = Date.now();
      const wait = MINUTE_MS - (now % MINUTE_MS) - BEFORE_MINUTE_END_MS;
      timer = setTimeout(
        () => {
          save()
            .catch((err: unknown) => log.warn({ err }, 'the chart minute could not be sampled'))
            .finally(schedule);
        },
        wait > 0 ? wait : wait + MINUTE_MS,
      );
      timer.unref();
    };
    schedule();
    ctx.effect(async () => {
      stopped = true;
      clearTimeout(timer);
      await save();
    });
    const source: ChartSource = {
      report: async (minutes) => {
        await save();
        return chartReport(await store.all(minuteOf(Date.now()) - minutes + 1), minutes);
      },
    };
    ctx.provide('charts', source);
  },
});
