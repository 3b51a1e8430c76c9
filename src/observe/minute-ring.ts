import type { Histogram, Counter } from 'prom-client';
import { FIRST_VISIBLE_BUCKETS_S, type Metrics, TURN_DURATION_BUCKETS_S } from './metrics.js';
import { addFigures, emptyFigures, type MinuteFigures, type MinuteRow, minuteOf, RING_MINUTES } from './minute-figures.js';

/** The counters' totals at one sample, in a minute's shape: the next sample's figures are the difference. */
type Totals = MinuteFigures;

/**
 * The daemon's own per-minute figures for the /admin charts: a ring of at most 1,440
 * minutes. It is fed by sampling the Prometheus metrics (what changed since the last sample
 * goes to the minute of this sample), so nothing on the message or turn path calls it: the
 * charts and /metrics count the same events by construction. A sample is taken at each
 * minute's end and before each read.
 */
export class MinuteRing {
  readonly #minutes = new Map<number, MinuteFigures>();
  /** Minutes changed since the last `takeDirty`: what the store must be told. */
  readonly #dirty = new Set<number>();
  #last: Totals | undefined;
  /** Samples run one at a time: two at once would count one difference twice. */
  #sampling: Promise<void> = Promise.resolve();

  constructor(private readonly metrics: Metrics) {}

  /** Continues the minutes a previous run of this instance stored. */
  load(rows: readonly MinuteRow[], nowMs = Date.now()): void {
    const oldest = minuteOf(nowMs) - RING_MINUTES + 1;
    for (const r of rows) if (r.minute >= oldest) this.#minutes.set(r.minute, r.figures);
  }

  /** Adds what the metrics counted since the last sample to the current minute. */
  sample(nowMs = Date.now()): Promise<void> {
    const run = this.#sampling.then(() => this.#sample(nowMs));
    this.#sampling = run.catch(() => {});
    return run;
  }

  async #sample(nowMs: number): Promise<void> {
    const now = await this.#totals();
    const before = this.#last;
    this.#last = now;
    // The first sample is the baseline: counts from before the ring started are not this minute's.
    if (!before) return;
    const d = emptyFigures();
    d.messages = Math.max(0, now.messages - before.messages);
    d.turns = Math.max(0, now.turns - before.turns);
    d.turnLatency = now.turnLatency.map((n, i) => Math.max(0, n - (before.turnLatency[i] ?? 0)));
    d.firstVisible = now.firstVisible.map((n, i) => Math.max(0, n - (before.firstVisible[i] ?? 0)));
    d.tokens = diff(now.tokens, before.tokens);
    d.cost = diff(now.cost, before.cost);
    d.refusals = diff(now.refusals, before.refusals);
    if (!d.messages && !d.turns && !Object.keys(d.tokens).length && !Object.keys(d.cost).length && !Object.keys(d.refusals).length) return;
    const minute = minuteOf(nowMs);
    const f = this.#minutes.get(minute) ?? emptyFigures();
    addFigures(f, d);
    this.#minutes.set(minute, f);
    this.#dirty.add(minute);
    for (const m of this.#minutes.keys()) if (m <= minute - RING_MINUTES) this.#minutes.delete(m);
  }

  /** The minutes changed since the last call, to write to the store. */
  takeDirty(): MinuteRow[] {
    const rows: MinuteRow[] = [];
    for (const minute of this.#dirty) {
      const figures = this.#minutes.get(minute);
      if (figures) rows.push({ minute, figures });
    }
    this.#dirty.clear();
    return rows;
  }

  /** Puts rows back whose write failed, so the next write tries them again. */
  redo(rows: readonly MinuteRow[]): void {
    for (const r of rows) if (this.#minutes.has(r.minute)) this.#dirty.add(r.minute);
  }

  get size(): number {
    return this.#minutes.size;
  }

  async #totals(): Promise<Totals> {
    const m = this.metrics;
    const [received, turnHist, visibleHist, tokens, cost, refused, quota] = await Promise.all([
      m.received.get(),
      m.turnDuration.get(),
      m.firstVisible.get(),
      m.tokens.get(),
      m.cost.get(),
      m.refused.get(),
      m.quotaRefusals.get(),
    ]);
    const turnLatency = bucketCounts(turnHist, TURN_DURATION_BUCKETS_S);
    return {
      messages: received.values.reduce((n, v) => n + v.value, 0),
      turns: turnLatency.reduce((a, b) => a + b, 0),
      turnLatency,
      firstVisible: bucketCounts(visibleHist, FIRST_VISIBLE_BUCKETS_S),
      tokens: sumBy(tokens, 'agent'),
      cost: sumBy(cost, 'agent'),
      refusals: { ...sumBy(refused, 'reason'), ...sumBy(quota, 'limit') },
    };
  }
}

type Read<T> = Awaited<ReturnType<T extends Counter ? Counter['get'] : Histogram['get']>>;

function sumBy(metric: Read<Counter>, label: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of metric.values) {
    const k = String(v.labels[label] ?? '');
    out[k] = (out[k] ?? 0) + v.value;
  }
  return out;
}

/** Per-bucket counts (not cumulative) over every label set, for `boundsS` and the overflow bucket last. */
function bucketCounts(metric: Read<Histogram>, boundsS: readonly number[]): number[] {
  const cumulative = new Array<number>(boundsS.length + 1).fill(0);
  for (const v of metric.values) {
    if (!v.metricName?.endsWith('_bucket')) continue;
    const le = v.labels.le;
    const i = le === '+Inf' ? boundsS.length : boundsS.indexOf(Number(le));
    if (i >= 0) cumulative[i]! += v.value;
  }
  return cumulative.map((c, i) => c - (i === 0 ? 0 : cumulative[i - 1]!));
}

function diff(now: Record<string, number>, before: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(now)) {
    const d = v - (before[k] ?? 0);
    if (d > 0) out[k] = d;
  }
  return out;
}
