import type { Db } from './db.js';

/** One turn's token usage, as the provider reported it (or estimated where it did not). */
export interface UsageRecord {
  /** ms since the epoch. */
  at: number;
  agent: string;
  model: string;
  channel: string;
  /** The conversation scope. */
  scope: string;
  inputTokens: number;
  outputTokens: number;
  reasoningTokens: number;
  cachedTokens: number;
  /** The counts were estimated from characters: the provider reported none. */
  estimated: boolean;
  /** In the currency of the model's price table; null when the model has no price. */
  cost: number | null;
}

/** Which turns to sum: every given field must match; `sinceMs` inclusive, `untilMs` exclusive. */
export interface UsageFilter {
  agent?: string;
  model?: string;
  channel?: string;
  scope?: string;
  sinceMs?: number;
  untilMs?: number;
}

export interface UsageTotals {
  turns: number;
  input_tokens: number;
  output_tokens: number;
  reasoning_tokens: number;
  cached_tokens: number;
  /** Turns whose counts were estimated. */
  estimated_turns: number;
  /** The sum over priced turns; turns of unpriced models add nothing. */
  cost: number;
}

export type UsageKey = 'channel' | 'agent' | 'model';
export type UsageRow = Record<UsageKey, string> & UsageTotals;

/**
 * Where turn usage is kept: the SQLite ledger below on one node, PostgreSQL in cluster mode
 * (src/cluster/pg-usage.ts); both pass test/store/contract.test.ts. Reports are async (a
 * query); `costSince` is synchronous because the budget gate and /status read it on every
 * turn.
 */
export interface UsageLedger {
  /** Stored with the turn's other closing writes (before its message counts as answered). */
  record(r: UsageRecord): void;
  totals(filter: UsageFilter): Promise<UsageTotals>;
  /** Totals per (channel, agent, model). */
  breakdown(filter: UsageFilter): Promise<UsageRow[]>;
  /**
   * An agent's cost since `sinceMs` (the daily budget). SQLite: exact. PostgreSQL: the whole
   * cluster's as of the last refresh, plus what this instance recorded since.
   */
  costSince(agent: string, sinceMs: number): number;
}

const SUMS = `COUNT(*) AS turns, COALESCE(SUM(input_tokens), 0) AS input_tokens, COALESCE(SUM(output_tokens), 0) AS output_tokens,
  COALESCE(SUM(reasoning_tokens), 0) AS reasoning_tokens, COALESCE(SUM(cached_tokens), 0) AS cached_tokens,
  COALESCE(SUM(estimated), 0) AS estimated_turns, COALESCE(SUM(cost), 0) AS cost`;

/**
 * The usage ledger in the daemon's SQLite database. It owns its table (created here, not
 * in the inbox migrations) so it stays a module of its own. Writes ride the group commit
 * when one is given: a turn's usage is written with its other closing writes.
 */
export class SqliteUsageLedger implements UsageLedger {
  readonly #insert;
  readonly #db: Db;
  readonly #flush: (() => void) | undefined;
  readonly #add: (write: () => void) => void;
  /** `PRAGMA data_version`: it changes when another connection (another process) commits to the file. */
  readonly #dataVersion;
  #seenVersion = -1;
  /**
   * Each agent's cost since the start of its budget day, summed from the table at the first read
   * of that day and kept up to date by `record`: the budget gate reads it on every turn, and
   * summing the day's rows each time (after forcing the group commit) grew with the day's turns.
   * Dropped when another connection commits (data_version moves), so the read stays exact.
   */
  readonly #spent = new Map<string, { sinceMs: number; cost: number }>();

  constructor(db: Db, group?: { add(write: () => void): void; flush(): void }) {
    this.#db = db;
    db.exec(`CREATE TABLE IF NOT EXISTS usage (
      id INTEGER PRIMARY KEY,
      at INTEGER NOT NULL,
      agent TEXT NOT NULL,
      model TEXT NOT NULL,
      channel TEXT NOT NULL,
      scope TEXT NOT NULL,
      input_tokens INTEGER NOT NULL,
      output_tokens INTEGER NOT NULL,
      reasoning_tokens INTEGER NOT NULL,
      cached_tokens INTEGER NOT NULL,
      estimated INTEGER NOT NULL,
      cost REAL
    );
    CREATE INDEX IF NOT EXISTS usage_at ON usage (at);
    CREATE INDEX IF NOT EXISTS usage_scope ON usage (scope, at);`);
    this.#insert = db.prepare(
      `INSERT INTO usage (at, agent, model, channel, scope, input_tokens, output_tokens, reasoning_tokens, cached_tokens, estimated, cost)
       VALUES (@at, @agent, @model, @channel, @scope, @inputTokens, @outputTokens, @reasoningTokens, @cachedTokens, @estimated, @cost)`,
    );
    this.#dataVersion = db.prepare('PRAGMA data_version').pluck();
    this.#flush = group ? () => group.flush() : undefined;
    this.#add = group ? (w) => group.add(w) : (w) => w();
  }

  record(r: UsageRecord): void {
    const row = { ...r, estimated: r.estimated ? 1 : 0 };
    this.#add(() => this.#insert.run(row));
    const spent = this.#spent.get(r.agent);
    if (spent && r.at >= spent.sinceMs) spent.cost += r.cost ?? 0;
  }

  #totals(filter: UsageFilter): UsageTotals {
    const { where, params } = whereOf(filter);
    this.#flush?.();
    return this.#db.prepare(`SELECT ${SUMS} FROM usage ${where}`).get(params) as UsageTotals;
  }

  totals(filter: UsageFilter): Promise<UsageTotals> {
    return Promise.resolve(this.#totals(filter));
  }

  breakdown(filter: UsageFilter): Promise<UsageRow[]> {
    const { where, params } = whereOf(filter);
    this.#flush?.();
    return Promise.resolve(
      this.#db
        .prepare(`SELECT channel, agent, model, ${SUMS} FROM usage ${where} GROUP BY channel, agent, model ORDER BY channel, agent, model`)
        .all(params) as UsageRow[],
    );
  }

  costSince(agent: string, sinceMs: number): number {
    const version = this.#dataVersion.get() as number;
    if (version !== this.#seenVersion) {
      this.#spent.clear();
      this.#seenVersion = version;
    }
    const known = this.#spent.get(agent);
    if (known?.sinceMs === sinceMs) return known.cost;
    const cost = this.#totals({ agent, sinceMs }).cost;
    this.#spent.set(agent, { sinceMs, cost });
    return cost;
  }
}

function whereOf(f: UsageFilter): { where: string; params: Record<string, string | number> } {
  const clauses: string[] = [];
  const params: Record<string, string | number> = {};
  for (const k of ['agent', 'model', 'channel', 'scope'] as const) {
    if (f[k] === undefined) continue;
    clauses.push(`${k} = @${k}`);
    params[k] = f[k];
  }
  if (f.sinceMs !== undefined) {
    clauses.push('at >= @sinceMs');
    params.sinceMs = f.sinceMs;
  }
  if (f.untilMs !== undefined) {
    clauses.push('at < @untilMs');
    params.untilMs = f.untilMs;
  }
  return { where: clauses.length ? `WHERE ${clauses.join(' AND ')}` : '', params };
}

/** The start of the UTC day `nowMs` falls in: "today" for /usage and `daily_budget`. */
export function startOfUtcDay(nowMs = Date.now()): number {
  return nowMs - (nowMs % 86_400_000);
}
