import { FIRST_VISIBLE_BUCKETS_S, TURN_DURATION_BUCKETS_S } from './metrics.js';
import { addFigures, emptyFigures, MINUTE_MS, type MinuteFigures, type MinuteRow, minuteOf, quantileMs } from './minute-figures.js';

/** The series the /admin charts draw: one value per minute, oldest first, `t` in seconds (uPlot's x). */
export interface ChartReport {
  minute_ms: number;
  t: number[];
  messages: number[];
  turns: number[];
  turn_p50_ms: Array<number | null>;
  turn_p99_ms: Array<number | null>;
  first_visible_p50_ms: Array<number | null>;
  first_visible_p99_ms: Array<number | null>;
  tokens: Record<string, number[]>;
  cost: Record<string, number[]>;
  refusals: Record<string, number[]>;
}

/** The `charts` service: the last minutes of the /admin charts (the whole cluster's in cluster mode). */
export interface ChartSource {
  report(minutes: number): Promise<ChartReport>;
}

/**
 * The last `minutes` minutes up to `nowMs` from stored rows (several per minute in a
 * cluster: they add up), every minute present, those without rows as zero.
 */
export function chartReport(rows: readonly MinuteRow[], minutes: number, nowMs = Date.now()): ChartReport {
  const last = minuteOf(nowMs);
  const first = last - minutes + 1;
  const byMinute = new Map<number, MinuteFigures>();
  for (const r of rows) {
    if (r.minute < first || r.minute > last) continue;
    const f = byMinute.get(r.minute) ?? emptyFigures();
    addFigures(f, r.figures);
    byMinute.set(r.minute, f);
  }
  const out: ChartReport = {
    minute_ms: MINUTE_MS,
    t: [],
    messages: [],
    turns: [],
    turn_p50_ms: [],
    turn_p99_ms: [],
    first_visible_p50_ms: [],
    first_visible_p99_ms: [],
    tokens: {},
    cost: {},
    refusals: {},
  };
  const keys = (pick: (f: MinuteFigures) => Record<string, number>) => [...new Set([...byMinute.values()].flatMap((f) => Object.keys(pick(f))))].sort();
  const series = (pick: (f: MinuteFigures) => Record<string, number>) => Object.fromEntries(keys(pick).map((k) => [k, [] as number[]]));
  out.tokens = series((f) => f.tokens);
  out.cost = series((f) => f.cost);
  out.refusals = series((f) => f.refusals);
  for (let m = first; m <= last; m++) {
    const f = byMinute.get(m);
    out.t.push((m * MINUTE_MS) / 1000);
    out.messages.push(f?.messages ?? 0);
    out.turns.push(f?.turns ?? 0);
    out.turn_p50_ms.push(f ? quantileMs(f.turnLatency, TURN_DURATION_BUCKETS_S, 0.5) : null);
    out.turn_p99_ms.push(f ? quantileMs(f.turnLatency, TURN_DURATION_BUCKETS_S, 0.99) : null);
    out.first_visible_p50_ms.push(f ? quantileMs(f.firstVisible, FIRST_VISIBLE_BUCKETS_S, 0.5) : null);
    out.first_visible_p99_ms.push(f ? quantileMs(f.firstVisible, FIRST_VISIBLE_BUCKETS_S, 0.99) : null);
    for (const [k, s] of Object.entries(out.tokens)) s.push(f?.tokens[k] ?? 0);
    // Rounded to a millionth: sums of prices carry float noise the page need not draw.
    for (const [k, s] of Object.entries(out.cost)) s.push(Math.round((f?.cost[k] ?? 0) * 1e6) / 1e6);
    for (const [k, s] of Object.entries(out.refusals)) s.push(f?.refusals[k] ?? 0);
  }
  return out;
}
