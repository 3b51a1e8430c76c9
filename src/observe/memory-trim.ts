/**
 * Gives memory the process no longer uses back to the operating system.
 *
 * V8 keeps what a burst made it take: a young generation grown to its largest size, an old
 * generation allowed to grow well past the live heap before it is collected again, and the
 * pages it freed kept mapped for reuse. A regular collection returns little of that; V8's
 * "last resort" collection (several full collections, compaction, pooled pages unmapped)
 * brings RSS back to about what is live. It pauses the process for tens to a few hundred
 * milliseconds, so it runs only:
 *
 * - when the daemon has gone idle after work: after start-up with no turn yet, at the first
 *   check with nothing queued or running; after turns, once none was queued, started, ended or
 *   running for IDLE_QUIET_MS (30 s; a check that fires a little early leaves it to the next,
 *   5 s later); and RSS more than 2 % above what it settled at after the last idle trim;
 * - under sustained load, when RSS has passed 1.5 times the settled RSS, at most once per
 *   30 s. A load trim that leaves RSS higher than the settled size (the
 *   live data grew) raises the settled size, so it is not repeated for nothing.
 *
 * Memory that grows without turns (a cluster instance that only forwards what it receives)
 * is not trimmed at idle: without work there is nothing a trim is for.
 *
 * It works beside `--heap-growing-percent=10`, which bounds how far the old generation grows
 * under load but never unmaps the pages it frees. It needs `--expose-gc`, on node's command
 * line or in CHANNELD_V8_FLAGS (the systemd unit and `npm start` set the variable; see
 * src/observe/v8-flags.ts); without it the trimmer stays off and says so once at debug level.
 */

/** What the daemon is doing, as the trimmer needs to know it. */
export interface Activity {
  /** Turns queued or running now. */
  pending(): number;
  /** A count that moves whenever a turn is queued, started or ends. */
  events(): number;
}

export interface MemoryTrimOptions {
  activity: Activity;
  /** The collection (src/observe/v8-flags.ts); by default `globalThis.gc`, which node's `--expose-gc` defines. */
  gc?: ((options: object) => void) | undefined;
  /** Resident set size in bytes. */
  rssBytes?: () => number;
  now?: () => number;
  onTrim?: (trim: Trim) => void;
}

export interface Trim {
  reason: 'idle' | 'load';
  rssBeforeBytes: number;
  rssAfterBytes: number;
  durationMs: number;
}

/** The collection that also unmaps V8's pooled pages, as `--expose-gc` exposes it. */
const lastResort = { type: 'major', execution: 'sync', flavor: 'last-resort' } as const;

export const CHECK_INTERVAL_MS = 5000;
/**
 * After turns, how long nothing may be queued, started or ended before an idle trim. What a
 * trim gives back, the next burst takes again, and paying for that is what made it slow: the
 * first burst of 1,000 conversations after a trim took 24-33 % more CPU and 70-200 ms more
 * first visible p99 than one that found the heap as the last burst left it
 * (docs/PERFORMANCE.md, sixteenth round). Traffic with lulls shorter than this keeps its
 * memory; a daemon left alone gives it back half a minute later. Start-up needs no wait: what
 * it leaves is not taken again.
 */
export const IDLE_QUIET_MS = 30_000;
/**
 * At idle, trim once RSS is this many times the settled size. Low: a pause after a burst
 * costs little at idle, and the RSS an operator reads at rest should be what the daemon
 * needs, not what the last burst left.
 */
const IDLE_RSS_RATIO = 1.02;
/** Under load, trim once RSS is this many times the settled size (the peak target is 1.5x idle). */
const LOAD_RSS_RATIO = 1.5;
/** Under load, no two trims closer than this: each pauses the process. */
const LOAD_MIN_GAP_MS = 30_000;

export class MemoryTrimmer {
  readonly #o: Required<Omit<MemoryTrimOptions, 'gc' | 'onTrim'>> & Pick<MemoryTrimOptions, 'gc' | 'onTrim'>;
  #timer: NodeJS.Timeout | undefined;
  /** RSS after the last idle trim; before the first, unknown (start-up is not settled). */
  #settledBytes: number | undefined;
  #lastEvents: number;
  /** Turns moved since the last trim; true at first: start-up is work. */
  #workSinceTrim = true;
  #lastTrimAt = Number.NEGATIVE_INFINITY;
  /** When a check last saw a turn queued, started, ended or running; start-up is not a turn. */
  #lastBusyAt = Number.NEGATIVE_INFINITY;

  constructor(options: MemoryTrimOptions) {
    this.#o = {
      gc: (globalThis as { gc?: (options: object) => void }).gc,
      rssBytes: () => process.memoryUsage.rss(),
      now: () => performance.now(),
      ...options,
    };
    this.#lastEvents = this.#o.activity.events();
  }

  /** False without a collection (no `--expose-gc` anywhere): nothing is ever trimmed. */
  get enabled(): boolean {
    return this.#o.gc !== undefined;
  }

  /** Looks every 5 s until stop(); the timer never keeps the process alive. */
  start(): void {
    if (!this.enabled || this.#timer) return;
    this.#timer = setInterval(() => this.check(), CHECK_INTERVAL_MS);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** One look; returns the trim it made, if any. Public so tests drive it without a clock. */
  check(): Trim | undefined {
    const { activity } = this.#o;
    const events = activity.events();
    const moved = events !== this.#lastEvents;
    this.#lastEvents = events;
    if (moved) this.#workSinceTrim = true;
    const rss = this.#o.rssBytes();
    if (!moved && activity.pending() === 0) {
      if (!this.#workSinceTrim || this.#o.now() - this.#lastBusyAt < IDLE_QUIET_MS) return undefined;
      if (this.#settledBytes !== undefined && rss <= this.#settledBytes * IDLE_RSS_RATIO) {
        this.#workSinceTrim = false; // the work left nothing worth a pause
        return undefined;
      }
      const trim = this.#trim('idle', rss);
      this.#settledBytes = trim.rssAfterBytes;
      return trim;
    }
    this.#lastBusyAt = this.#o.now();
    // Busy since start-up: what it holds now is the reference until the first idle trim.
    this.#settledBytes ??= rss;
    if (rss <= this.#settledBytes * LOAD_RSS_RATIO || this.#o.now() - this.#lastTrimAt < LOAD_MIN_GAP_MS) return undefined;
    const trim = this.#trim('load', rss);
    this.#settledBytes = Math.max(this.#settledBytes, trim.rssAfterBytes);
    return trim;
  }

  #trim(reason: Trim['reason'], rssBeforeBytes: number): Trim {
    const started = this.#o.now();
    this.#o.gc?.(lastResort);
    this.#lastTrimAt = this.#o.now();
    this.#workSinceTrim = false;
    const trim = { reason, rssBeforeBytes, rssAfterBytes: this.#o.rssBytes(), durationMs: this.#lastTrimAt - started };
    this.#o.onTrim?.(trim);
    return trim;
  }
}
