import type { ModelConfig } from '../config/schema.js';
import type { TurnContext } from '../contracts/turn.js';
import type { UsageFilter, UsageRow, UsageTotals } from '../store/usage-ledger.js';
import { costOf } from './usage-hooks.js';

/** What a running turn is counted under until its usage is stored. */
export interface RunningTurn {
  agent: string;
  model: string;
  channel: string;
  scope: string;
}

const zero = (): UsageTotals => ({ turns: 0, input_tokens: 0, output_tokens: 0, reasoning_tokens: 0, cached_tokens: 0, estimated_turns: 0, cost: 0 });

/**
 * The usage of turns still running, in this process: their model steps reported so far
 * (TurnContext.stepUsage). /usage and the usage action add it to the stored ledger, so a long
 * turn's tokens and cost show while it runs; when the turn ends its stored record replaces it
 * (the same turn counted once). Not shared across a cluster: each instance adds its own.
 */
export class LiveUsage {
  readonly #running = new Map<TurnContext, RunningTurn>();

  constructor(private readonly models: () => Record<string, ModelConfig>) {}

  add(ctx: TurnContext, turn: RunningTurn): void {
    this.#running.set(ctx, turn);
  }

  remove(ctx: TurnContext): void {
    this.#running.delete(ctx);
  }

  /** Running turns matching `filter` with tokens reported, per (channel, agent, model); `nowMs` is their time. */
  breakdown(filter: UsageFilter, nowMs = Date.now()): UsageRow[] {
    if ((filter.sinceMs !== undefined && nowMs < filter.sinceMs) || (filter.untilMs !== undefined && nowMs >= filter.untilMs)) return [];
    const rows = new Map<string, UsageRow>();
    for (const [ctx, t] of this.#running) {
      const u = ctx.stepUsage;
      if (u.inputTokens + u.outputTokens === 0) continue;
      if ((['agent', 'model', 'channel', 'scope'] as const).some((k) => filter[k] !== undefined && filter[k] !== t[k])) continue;
      const key = `${t.channel}\u0000${t.agent}\u0000${t.model}`;
      const row = rows.get(key) ?? { channel: t.channel, agent: t.agent, model: t.model, ...zero() };
      row.turns++;
      row.input_tokens += u.inputTokens;
      row.output_tokens += u.outputTokens;
      row.reasoning_tokens += u.reasoningTokens ?? 0;
      row.cached_tokens += u.cachedTokens ?? 0;
      row.cost += costOf(this.models()[t.model], u.inputTokens, u.outputTokens) ?? 0;
      rows.set(key, row);
    }
    return [...rows.values()];
  }
}

/** The stored rows and total with the running turns' rows added in. */
export function withRunning(stored: { rows: UsageRow[]; total: UsageTotals }, running: UsageRow[]): { rows: UsageRow[]; total: UsageTotals } {
  if (!running.length) return stored;
  const keys = ['turns', 'input_tokens', 'output_tokens', 'reasoning_tokens', 'cached_tokens', 'estimated_turns', 'cost'] as const;
  const rows = stored.rows.map((r) => ({ ...r }));
  const total = { ...stored.total };
  for (const live of running) {
    let row = rows.find((r) => r.channel === live.channel && r.agent === live.agent && r.model === live.model);
    if (!row) rows.push((row = { channel: live.channel, agent: live.agent, model: live.model, ...zero() }));
    for (const k of keys) {
      row[k] += live[k];
      total[k] += live[k];
    }
  }
  rows.sort((a, b) => a.channel.localeCompare(b.channel) || a.agent.localeCompare(b.agent) || a.model.localeCompare(b.model));
  return { rows, total };
}
