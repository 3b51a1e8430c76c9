import type { UsageFilter, UsageLedger, UsageRecord, UsageRow, UsageTotals } from '../store/usage-ledger.js';
import type { PgWriter } from './pg-writer.js';

const SUMS = `COUNT(*)::int AS turns, COALESCE(SUM(input_tokens), 0)::float8 AS input_tokens, COALESCE(SUM(output_tokens), 0)::float8 AS output_tokens,
  COALESCE(SUM(reasoning_tokens), 0)::float8 AS reasoning_tokens, COALESCE(SUM(cached_tokens), 0)::float8 AS cached_tokens,
  (COUNT(*) FILTER (WHERE estimated))::int AS estimated_turns, COALESCE(SUM(cost), 0)::float8 AS cost`;

/** How often an instance asks PostgreSQL what the whole cluster spent (per agent, at most). */
const BUDGET_REFRESH_MS = 1000;

interface Known {
  sinceMs: number;
  cost: number;
  refreshedAt: number;
}

/**
 * The usage ledger in PostgreSQL: one table for the whole cluster, so reports and daily
 * budgets count every instance's turns. Records go behind through the turn's write queue
 * (committed before its item is acked); reports flush this instance's queue first. The
 * budget read (`costSince`) must be synchronous: it is the cluster's total as of the last
 * `refresh` (done before each turn of an agent with a budget, at most once a second) plus
 * what this instance recorded since, so other instances' spending shows within a second.
 */
export class PgUsageLedger implements UsageLedger {
  readonly #known = new Map<string, Known>();
  /** This instance's records not yet counted in `#known`, per agent. */
  readonly #local = new Map<string, Array<{ at: number; cost: number; seq: number }>>();
  #seq = 0;

  constructor(private readonly w: PgWriter) {}

  record(r: UsageRecord): void {
    this.w.add(
      `INSERT INTO usage (at, agent, model, channel, scope, input_tokens, output_tokens, reasoning_tokens, cached_tokens, estimated, cost)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
      [r.at, r.agent, r.model, r.channel, r.scope, r.inputTokens, r.outputTokens, r.reasoningTokens, r.cachedTokens, r.estimated, r.cost],
    );
    this.#seq++;
    // Kept only for agents whose budget is followed (refreshed before their turns), so an
    // agent without a budget does not grow this list; `refresh` drops what the sum counts.
    const list = this.#local.get(r.agent);
    if (list) list.push({ at: r.at, cost: r.cost ?? 0, seq: this.#seq });
    else if (this.#known.has(r.agent)) this.#local.set(r.agent, [{ at: r.at, cost: r.cost ?? 0, seq: this.#seq }]);
  }

  async totals(filter: UsageFilter): Promise<UsageTotals> {
    const { where, params } = whereOf(filter);
    await this.w.flush();
    const [row] = await this.w.read<UsageTotals>(`SELECT ${SUMS} FROM usage ${where}`, params);
    return row!;
  }

  async breakdown(filter: UsageFilter): Promise<UsageRow[]> {
    const { where, params } = whereOf(filter);
    await this.w.flush();
    return this.w.read<UsageRow>(
      `SELECT channel, agent, model, ${SUMS} FROM usage ${where} GROUP BY channel, agent, model ORDER BY channel, agent, model`,
      params,
    );
  }

  /** Learns the cluster's spending of `agent` since `sinceMs` (skipped when it was learnt within the last second). */
  async refresh(agent: string, sinceMs: number, nowMs = Date.now()): Promise<void> {
    const k = this.#known.get(agent);
    if (k && k.sinceMs === sinceMs && nowMs - k.refreshedAt < BUDGET_REFRESH_MS) return;
    // Everything recorded up to here is in the sum once the queue is flushed.
    const boundary = this.#seq;
    await this.w.flush();
    const [row] = await this.w.read<{ cost: number }>('SELECT COALESCE(SUM(cost), 0)::float8 AS cost FROM usage WHERE agent = $1 AND at >= $2', [
      agent,
      sinceMs,
    ]);
    this.#known.set(agent, { sinceMs, cost: row!.cost, refreshedAt: nowMs });
    this.#local.set(
      agent,
      (this.#local.get(agent) ?? []).filter((e) => e.seq > boundary),
    );
  }

  costSince(agent: string, sinceMs: number): number {
    const k = this.#known.get(agent);
    const base = k && k.sinceMs === sinceMs ? k.cost : 0;
    let local = 0;
    for (const e of this.#local.get(agent) ?? []) if (e.at >= sinceMs) local += e.cost;
    return base + local;
  }
}

function whereOf(f: UsageFilter): { where: string; params: Array<string | number> } {
  const clauses: string[] = [];
  const params: Array<string | number> = [];
  for (const k of ['agent', 'model', 'channel', 'scope'] as const) {
    if (f[k] === undefined) continue;
    params.push(f[k]);
    clauses.push(`${k} = $${params.length}`);
  }
  if (f.sinceMs !== undefined) {
    params.push(f.sinceMs);
    clauses.push(`at >= $${params.length}`);
  }
  if (f.untilMs !== undefined) {
    params.push(f.untilMs);
    clauses.push(`at < $${params.length}`);
  }
  return { where: clauses.length ? `WHERE ${clauses.join(' AND ')}` : '', params };
}
