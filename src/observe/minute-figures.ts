import { FIRST_VISIBLE_BUCKETS_S, TURN_DURATION_BUCKETS_S } from './metrics.js';

/** One minute is the unit of the /admin charts; 1,440 of them are the 24 h they show. */
export const MINUTE_MS = 60_000;
export const RING_MINUTES = 1440;
/** Agents and refusal reasons are config- and code-defined; a cap keeps a minute small whatever happens. */
const MAX_KEYS = 64;

/**
 * What the daemon did in one minute. Latencies are kept as counts per fixed bucket (the
 * bounds of the matching Prometheus histogram, plus one past the last), not as samples:
 * a minute stays the same size however many turns it ran, and minutes of several
 * instances add up bucket by bucket.
 */
export interface MinuteFigures {
  messages: number;
  turns: number;
  /** Turn durations per bucket of TURN_DURATION_BUCKETS_S (last entry: above the last bound). */
  turnLatency: number[];
  /** Times to the first visible text per bucket of FIRST_VISIBLE_BUCKETS_S. */
  firstVisible: number[];
  tokens: Record<string, number>;
  cost: Record<string, number>;
  /** Refused messages by reason: busy, not_allowed, storage, or a quota's name. */
  refusals: Record<string, number>;
}

/** A stored minute: its start in minutes since the epoch. */
export interface MinuteRow {
  minute: number;
  figures: MinuteFigures;
}

/**
 * Where minutes are kept across restarts: the SQLite store on one node, PostgreSQL in
 * cluster mode (one row per instance and minute; `all` adds every instance's).
 */
export interface MinuteStore {
  /** This instance's minutes since `sinceMinute`, to continue them after a restart. */
  own(sinceMinute: number): Promise<MinuteRow[]>;
  /** Every instance's minutes since `sinceMinute` (several rows per minute in a cluster). */
  all(sinceMinute: number): Promise<MinuteRow[]>;
  /** Replaces this instance's rows of these minutes, and forgets rows older than `sinceMinute`. */
  write(rows: readonly MinuteRow[], sinceMinute: number): Promise<void>;
}

export const minuteOf = (ms: number): number => Math.floor(ms / MINUTE_MS);

export function emptyFigures(): MinuteFigures {
  return {
    messages: 0,
    turns: 0,
    turnLatency: new Array<number>(TURN_DURATION_BUCKETS_S.length + 1).fill(0),
    firstVisible: new Array<number>(FIRST_VISIBLE_BUCKETS_S.length + 1).fill(0),
    tokens: {},
    cost: {},
    refusals: {},
  };
}

function addTo(into: Record<string, number>, from: Record<string, number>): void {
  for (const [k, v] of Object.entries(from)) {
    if (!(k in into) && Object.keys(into).length >= MAX_KEYS) continue;
    into[k] = (into[k] ?? 0) + v;
  }
}

/** Adds `from` into `into` (a later sample of the same minute, or another instance's). */
export function addFigures(into: MinuteFigures, from: MinuteFigures): void {
  into.messages += from.messages;
  into.turns += from.turns;
  for (const [i, n] of from.turnLatency.entries()) into.turnLatency[i]! += n;
  for (const [i, n] of from.firstVisible.entries()) into.firstVisible[i]! += n;
  addTo(into.tokens, from.tokens);
  addTo(into.cost, from.cost);
  addTo(into.refusals, from.refusals);
}

/**
 * A stored minute read back, or undefined when it is not one this build can add up (another
 * version's bucket bounds, a damaged row): a chart loses a minute rather than the daemon its start.
 */
export function parseFigures(raw: unknown): MinuteFigures | undefined {
  const f = (typeof raw === 'string' ? safeJson(raw) : raw) as Partial<MinuteFigures> | undefined;
  if (!f || typeof f !== 'object') return undefined;
  const nums = (a: unknown, n: number) => Array.isArray(a) && a.length === n && a.every((x) => typeof x === 'number');
  const map = (m: unknown) => m !== null && typeof m === 'object' && Object.values(m).every((x) => typeof x === 'number');
  if (typeof f.messages !== 'number' || typeof f.turns !== 'number') return undefined;
  if (!nums(f.turnLatency, TURN_DURATION_BUCKETS_S.length + 1) || !nums(f.firstVisible, FIRST_VISIBLE_BUCKETS_S.length + 1)) return undefined;
  if (!map(f.tokens) || !map(f.cost) || !map(f.refusals)) return undefined;
  return f as MinuteFigures;
}

function safeJson(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return undefined;
  }
}

/**
 * The `q` quantile (0..1) of per-bucket counts, in ms, interpolated linearly inside its
 * bucket (from the previous bound, or 0); null without samples. Past the last bound the
 * last bound is what is known.
 */
export function quantileMs(counts: readonly number[], boundsS: readonly number[], q: number): number | null {
  const total = counts.reduce((a, b) => a + b, 0);
  if (total === 0) return null;
  const rank = q * total;
  let below = 0;
  for (let i = 0; i < counts.length; i++) {
    const n = counts[i]!;
    if (n > 0 && below + n >= rank) {
      if (i >= boundsS.length) return boundsS.at(-1)! * 1000;
      const lo = i === 0 ? 0 : boundsS[i - 1]!;
      const hi = boundsS[i]!;
      return Math.round((lo + ((rank - below) / n) * (hi - lo)) * 1000);
    }
    below += n;
  }
  return boundsS.at(-1)! * 1000;
}
