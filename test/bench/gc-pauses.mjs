// Loaded into a daemon with `--import` by test/bench/burst-timeline.ts: appends each pause of
// V8's collector to `channeld-gc-<pid>.log` in the OS temp dir, one line each:
// "<start, ms since the epoch> <kind> <duration ms>". Node reports pauses on the main thread
// (a scavenge, the end of a mark-compact, the start of incremental marking): neither the
// helper threads' concurrent work nor later marking steps are in them, so their sum is a
// lower bound. Bench-only: never loaded by the daemon itself.
import { appendFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { constants, PerformanceObserver, performance } from 'node:perf_hooks';

const file = join(tmpdir(), `channeld-gc-${process.pid}.log`);
writeFileSync(file, '');
const kinds = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'scavenge',
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'mark-compact',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weak-callbacks',
};
// Entries come in batches: one append per batch, not per pause.
new PerformanceObserver((list) => {
  let lines = '';
  for (const e of list.getEntries())
    lines += `${(performance.timeOrigin + e.startTime).toFixed(1)} ${kinds[e.detail?.kind] ?? 'other'} ${e.duration.toFixed(2)}\n`;
  appendFileSync(file, lines);
}).observe({ entryTypes: ['gc'] });
