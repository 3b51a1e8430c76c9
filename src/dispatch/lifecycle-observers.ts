import type { InboxItem } from '../inbox/item.js';
import type { LifecycleObserver } from '../inbox/lifecycle.js';
import type { Metrics } from '../observe/metrics.js';
import type { TaskTracker } from './tracker.js';

/**
 * The task tracker follows turns, not items: a queued item is a queued task, a turn is
 * tracked under its first item's id (items merged into it by `collect` leave the list),
 * and a task leaves when its turn ends or its item leaves the queue.
 */
export function trackerObserver(tracker: TaskTracker): LifecycleObserver {
  const forget = (items: readonly InboxItem[]) => {
    for (const it of items) tracker.finished(String(it.id));
  };
  return {
    queued: (item) => tracker.queued(String(item.id), item.message.channelId, item.scope),
    started: (items) => {
      forget(items.slice(1));
      tracker.started(String(items[0]!.id));
    },
    finished: (items) => tracker.finished(String(items[0]!.id)),
    interrupted: (items) => tracker.finished(String(items[0]!.id)),
    dropped: forget,
    released: forget,
  };
}

/** The queued and in-flight gauges, and the count of items refused because the queue was full. */
export function metricsObserver(metrics: Metrics): LifecycleObserver {
  let queued = 0;
  let inFlight = 0;
  const setQueued = (delta: number) => metrics.queued.set((queued += delta));
  return {
    queued: () => setQueued(1),
    refused: (item) => metrics.refused.inc({ channel: item.message.channelId, reason: 'busy' }),
    started: (items) => {
      setQueued(-items.length);
      metrics.inFlight.set(++inFlight);
    },
    finished: () => metrics.inFlight.set(--inFlight),
    interrupted: () => metrics.inFlight.set(--inFlight),
    dropped: (items) => setQueued(-items.length),
    released: (items) => setQueued(-items.length),
  };
}
