import { estimateTokens, type Usage } from '../contracts/agent-events.js';
import type { AgentConfig, ModelConfig } from '../config/schema.js';
import { HookResult } from '../contracts/hooks.js';
import type { Runtime } from '../runtime/runtime.js';
import type { TurnContext } from '../contracts/turn.js';
import { startOfUtcDay, type UsageLedger, type UsageRecord } from '../store/usage-ledger.js';
import type { SpendHold, SpendReservations } from '../store/reservations.js';
import type { AgentInput } from '../contracts/agent-runner.js';
import { formatAmount } from '../util/money.js';

export interface UsageDeps {
  agentName: string;
  agent: () => AgentConfig;
  /** The live `[models]` table. */
  models: () => Record<string, ModelConfig>;
  ledger: UsageLedger;
  /** Told about every stored record (the token counters of /metrics). */
  onRecorded?: (r: UsageRecord) => void;
  /** Where `daily_budget` reserves a turn's cost before the model call; without it only the start-of-turn check applies. */
  spend?: SpendReservations;
  /** Running turns (src/workspace/live-usage.ts): /usage adds their model steps until the turn's record is stored. */
  live?: {
    add(ctx: TurnContext, turn: { agent: string; model: string; channel: string; scope: string }): void;
    remove(ctx: TurnContext): void;
  };
}

/** What a day's budget looks like right now. */
export interface BudgetState {
  daily: number;
  spent_today: number;
  left: number;
}

/** Tokens to money with the model's price table; null when the model has no price. */
export function costOf(model: ModelConfig | undefined, inputTokens: number, outputTokens: number): number | null {
  if (model?.price_in_per_mtok === undefined && model?.price_out_per_mtok === undefined) return null;
  return (inputTokens * (model.price_in_per_mtok ?? 0) + outputTokens * (model.price_out_per_mtok ?? 0)) / 1_000_000;
}

/** What a turn may cost at most: the prompt as sent, and the longest completion allowed; 0 for an unpriced model. */
export function turnEstimate(agent: AgentConfig, models: Record<string, ModelConfig>, input: AgentInput): number {
  const model = input.model ?? agent.model ?? agent.provider;
  return costOf(models[model], estimateTokens(inputChars(input)), agent.max_output_tokens) ?? 0;
}

/** Turns a gate refused after they were built for the model: they were never sent, so nothing is recorded. */
const refusedTurns = new WeakSet<TurnContext>();
export function markRefused(ctx: TurnContext): void {
  refusedTurns.add(ctx);
}

/** Where usage_record leaves the turn's stored record (ctx.extras) for hooks settling what the turn spent. */
export const USAGE_RECORD = 'usage.record';

/** The agent's budget today, or undefined without `daily_budget`. */
export function budgetState(deps: UsageDeps, nowMs = Date.now()): BudgetState | undefined {
  const daily = deps.agent().daily_budget;
  if (daily === undefined) return undefined;
  const spent = deps.ledger.costSince(deps.agentName, startOfUtcDay(nowMs));
  return { daily, spent_today: round(spent), left: round(Math.max(0, daily - spent)) };
}

function round(n: number): number {
  return Math.round(n * 1e6) / 1e6;
}

/** The model that served (or was asked), without its provider prefix. */
function modelOf(ctx: TurnContext, agent: AgentConfig): string {
  const served = ctx.ending?.type === 'done' ? ctx.ending.model : undefined;
  if (served) return served.slice(served.indexOf(':') + 1);
  return ctx.input?.model ?? agent.model ?? agent.provider;
}

/** The characters sent to the model: the prompt's size before it is counted in tokens. */
function inputChars(input: AgentInput): number {
  return input.system.length + input.text.length + input.history.reduce((n, m) => n + m.content.length, 0);
}

/** The provider's counts, or an estimate from characters for turns that ended without them. */
function usageOf(ctx: TurnContext): Usage {
  if (ctx.ending?.type === 'done') return ctx.ending.usage;
  const input = ctx.input;
  const inChars = input ? inputChars(input) : ctx.message.text.length;
  return { inputTokens: estimateTokens(inChars), outputTokens: estimateTokens(ctx.text.length + ctx.reasoning.length), estimated: true };
}

/**
 * Usage and cost: every turn that reached the model stores its usage; an agent whose
 * `daily_budget` is spent refuses new turns (commands such as /usage and /status still
 * answer, because they are dispatched before this gate).
 */
export function registerUsage(runtime: Runtime, deps: UsageDeps): void {
  /** Each turn's reservation until it is settled. */
  const holds = new WeakMap<TurnContext, SpendHold>();
  // A promise only when the turn held part of the budget: no hold, nothing to wait for.
  const settle = (ctx: TurnContext, actual: number): Promise<void> | undefined => {
    const hold = holds.get(ctx);
    if (!hold) return undefined;
    holds.delete(ctx);
    return hold.settle(actual);
  };
  runtime.hooks.register({
    phase: 'post_dispatch',
    name: 'daily_budget',
    priority: 0,
    run: () => {
      const b = budgetState(deps);
      if (!b || b.left > 0) return;
      return HookResult.shortCircuit(spentReply(b.spent_today, b.daily));
    },
  });
  // Checked when the turn starts, the budget let every turn running at once through; the
  // reservation counts the others' calls before they are paid, so together they stop at it.
  runtime.hooks.register({
    phase: 'pre_execute',
    name: 'daily_budget_reserve',
    priority: 0,
    // Synchronous without a daily budget (most agents): an async hook makes the rest of its phase wait.
    run: (ctx) => {
      const agent = deps.agent();
      const daily = agent.daily_budget;
      const spend = deps.spend;
      if (daily === undefined || !spend || !ctx.input) return;
      const estimate = turnEstimate(agent, deps.models(), ctx.input);
      if (!estimate) return; // an unpriced model costs nothing
      return reserve(ctx, spend, daily, estimate);
    },
  });
  async function reserve(ctx: TurnContext, spend: NonNullable<typeof deps.spend>, daily: number, estimate: number): Promise<HookResult | undefined> {
    const sinceMs = startOfUtcDay();
    const r = await spend.reserve(
      {
        key: `daily:${deps.agentName}`,
        windowStartMs: sinceMs,
        limit: daily,
        recorded: async () => (await deps.ledger.totals({ agent: deps.agentName, sinceMs })).cost,
      },
      estimate,
    );
    if (r.granted) return void holds.set(ctx, r.hold);
    markRefused(ctx);
    if (r.held === 0) return HookResult.shortCircuit(spentReply(r.settled, daily));
    return HookResult.shortCircuit(
      `This assistant's daily budget has too little left for another answer right now (${formatAmount(r.settled)} of ${formatAmount(daily)} spent, ${formatAmount(r.held)} held by answers in progress; one answer may cost up to ${formatAmount(estimate)}). Try again shortly; /usage shows what was spent.`,
    );
  }
  // From here the turn's model steps count in /usage as they are reported, until usage_record stores the turn.
  runtime.hooks.register({
    phase: 'pre_execute',
    name: 'usage_live',
    priority: 1,
    run: (ctx) => {
      const agent = deps.agent();
      deps.live?.add(ctx, { agent: deps.agentName, model: modelOf(ctx, agent), channel: ctx.message.channelId, scope: ctx.scope });
    },
  });
  // A turn that ended before its usage was recorded (a failing hook) releases what it held.
  runtime.hooks.register({
    phase: 'finally',
    name: 'daily_budget_release',
    run: (ctx) => {
      deps.live?.remove(ctx);
      return settle(ctx, 0);
    },
  });
  runtime.hooks.register({
    phase: 'post_response',
    name: 'usage_record',
    priority: 20,
    run: (ctx) => {
      // Commands and short circuits never reached a model: nothing was spent.
      if (!ctx.runner || ctx.command || refusedTurns.has(ctx)) return;
      const agent = deps.agent();
      const u = usageOf(ctx);
      const model = modelOf(ctx, agent);
      const record: UsageRecord = {
        at: Date.now(),
        agent: deps.agentName,
        model,
        channel: ctx.message.channelId,
        scope: ctx.scope,
        inputTokens: u.inputTokens,
        outputTokens: u.outputTokens,
        reasoningTokens: u.reasoningTokens ?? 0,
        cachedTokens: u.cachedTokens ?? 0,
        estimated: u.estimated,
        cost: costOf(deps.models()[model], u.inputTokens, u.outputTokens),
      };
      deps.ledger.record(record);
      // Stored: from now on the ledger counts this turn, not the running view.
      deps.live?.remove(ctx);
      deps.onRecorded?.(record);
      ctx.extras.set(USAGE_RECORD, record);
      return settle(ctx, record.cost ?? 0);
    },
  });
}

function spentReply(spent: number, daily: number): string {
  return `This assistant has used its daily budget (${formatAmount(spent)} of ${formatAmount(daily)}), so it takes no new questions until 00:00 UTC. /usage shows what was spent.`;
}
