import type { AgentConfig, ModelConfig } from '../config/schema.js';
import { HookResult } from '../contracts/hooks.js';
import type { TurnContext } from '../contracts/turn.js';
import type { AgentInput } from '../contracts/agent-runner.js';
import { quotaRules, type QuotaKeys, type QuotaName, type QuotaRule } from '../quotas/limits.js';
import { formatReset, windowOf, type QuotaWindow } from '../quotas/windows.js';
import type { Runtime } from '../runtime/runtime.js';
import type { SpendHold, SpendReservations } from '../store/reservations.js';
import type { UsageLedger, UsageRecord } from '../store/usage-ledger.js';
import { formatAmount } from '../util/money.js';
import { markRefused, turnEstimate, USAGE_RECORD } from './usage-hooks.js';

/** What the quotas of one channel are, as configured (`[limits]`, agent, channel: most specific wins). */
export interface ChannelQuotas {
  quotas: QuotaKeys;
  /** The channel's `admins`: never refused. */
  admins: readonly string[];
}

export interface QuotaDeps {
  agent: () => AgentConfig;
  models: () => Record<string, ModelConfig>;
  channel: (channelId: string) => ChannelQuotas;
  spend: SpendReservations;
  ledger: UsageLedger;
  /** Told about every refused message (the refusal counter of /metrics: by limit only). */
  onRefused?: (limit: QuotaName) => void;
}

/** One limit as a sender stands against it (/usage). */
export interface QuotaStanding {
  limit: QuotaName;
  used: number;
  max: number;
  resets_at: string;
}

/**
 * Per-person and per-channel quotas, checked before the model is called with the same
 * reservations as the daily budget: each limit reserves what the turn may cost (a turn
 * counts 1) and settles what it did cost after, so turns running at once cannot all pass a
 * limit that has room for one. A refused message gets no model call and one reply per
 * window and sender naming the limit and when it resets; later ones in the window get none.
 */
export class Quotas {
  readonly #holds = new WeakMap<TurnContext, Array<{ rule: QuotaRule; hold: SpendHold }>>();

  constructor(private readonly deps: QuotaDeps) {}

  register(runtime: Runtime): void {
    runtime.hooks.register({ phase: 'pre_execute', name: 'quotas_reserve', before: ['daily_budget_reserve'], run: (ctx) => this.#reserve(ctx) });
    // After usage_record (priority 20): the stored record says what the turn spent.
    runtime.hooks.register({
      phase: 'post_response',
      name: 'quotas_settle',
      priority: 21,
      run: (ctx) => {
        const record = ctx.extras.get(USAGE_RECORD) as UsageRecord | undefined;
        if (record) return this.#settle(ctx, (rule) => (rule.counts === 'turns' ? 1 : (record.cost ?? 0)));
      },
    });
    // A turn that never reached its record (refused later, failed) spent nothing.
    runtime.hooks.register({ phase: 'finally', name: 'quotas_release', run: (ctx) => this.#settle(ctx, () => 0) });
  }

  /** Where one sender stands against every limit of the channel; empty without quotas or for its admins. */
  async standing(channelId: string, senderId: string, nowMs = Date.now()): Promise<QuotaStanding[]> {
    const { quotas, admins } = this.deps.channel(channelId);
    if (admins.includes(senderId)) return [];
    return Promise.all(
      quotaRules(quotas, channelId, senderId).map(async (rule) => {
        const win = windowOf(rule.periodMs, nowMs);
        const w = await this.deps.spend.peek(rule.key, win.startMs);
        const used = w ? w.settled + w.held : await this.#recorded(rule, channelId, win.startMs);
        return { limit: rule.name, used: round(used), max: rule.limit, resets_at: new Date(win.resetsAtMs).toISOString() };
      }),
    );
  }

  /** Synchronous where no quota applies (most turns): a promise would make the rest of its phase wait. */
  #reserve(ctx: TurnContext): Promise<HookResult | undefined> | undefined {
    if (!ctx.input) return;
    const { channelId, sender } = ctx.message;
    const { quotas, admins } = this.deps.channel(channelId);
    if (admins.includes(sender.id)) return;
    const rules = quotaRules(quotas, channelId, sender.id);
    if (!rules.length) return;
    return this.#reserveRules(ctx, rules, channelId, ctx.input);
  }

  async #reserveRules(ctx: TurnContext, rules: QuotaRule[], channelId: string, input: AgentInput): Promise<HookResult | undefined> {
    const nowMs = Date.now();
    const estimate = () => turnEstimate(this.deps.agent(), this.deps.models(), input);
    const granted: Array<{ rule: QuotaRule; hold: SpendHold }> = [];
    this.#holds.set(ctx, granted);
    for (const rule of rules) {
      const amount = rule.counts === 'turns' ? 1 : estimate();
      if (amount === 0) continue; // an unpriced model costs nothing
      const win = windowOf(rule.periodMs, nowMs);
      const r = await this.deps.spend.reserve(
        { key: rule.key, windowStartMs: win.startMs, limit: rule.limit, recorded: () => this.#recorded(rule, channelId, win.startMs) },
        amount,
      );
      if (r.granted) {
        granted.push({ rule, hold: r.hold });
        continue;
      }
      await this.#settle(ctx, () => 0);
      markRefused(ctx);
      this.deps.onRefused?.(rule.name);
      // Money held by answers in progress may come back (they may cost less): told every time.
      if (r.held > 0 && rule.counts === 'cost')
        return HookResult.shortCircuit(`${describe(rule, r.settled, 'busy')} Try again shortly; /usage shows where you stand.`);
      if (!(await this.#firstTold(rule, win))) return HookResult.skipAgent;
      return HookResult.shortCircuit(
        `${describe(rule, r.settled, 'spent')} It resets at ${formatReset(win.resetsAtMs, nowMs)}; until then your messages here get no answer. /usage shows where you stand.`,
      );
    }
  }

  /**
   * True the first time a refusal of this window and sender is told. Counted as a window of
   * its own with room for one, in the same reservations: so it is once per window across a
   * restart (SQLite) and across the instances of a cluster (PostgreSQL), not once per process.
   */
  async #firstTold(rule: QuotaRule, win: QuotaWindow): Promise<boolean> {
    const r = await this.deps.spend.reserve({ key: `told:${rule.key}`, windowStartMs: win.startMs, limit: 1, recorded: async () => 0 }, 1);
    if (!r.granted) return false;
    await r.hold.settle(1);
    return true;
  }

  /** A promise only when the turn held something: a hook that waits for nothing keeps its phase synchronous. */
  #settle(ctx: TurnContext, actual: (rule: QuotaRule) => number): Promise<void> | undefined {
    const holds = this.#holds.get(ctx);
    if (!holds) return undefined;
    this.#holds.delete(ctx);
    return Promise.all(holds.map(({ rule, hold }) => hold.settle(actual(rule)))).then(() => undefined);
  }

  /**
   * What the ledger holds for a window before reservations counted it. The ledger keeps no
   * sender, so a sender's window starts from zero the first time it is counted; after that
   * the reservations keep it (SQLite on one node, across restarts; PostgreSQL for the whole
   * cluster). A channel's spend comes from the ledger.
   */
  async #recorded(rule: QuotaRule, channelId: string, sinceMs: number): Promise<number> {
    if (rule.name !== 'channel_cost_per_day') return 0;
    return (await this.deps.ledger.totals({ channel: channelId, sinceMs })).cost;
  }
}

function describe(rule: QuotaRule, settled: number, why: 'spent' | 'busy'): string {
  if (rule.name === 'user_turns_per_hour')
    return `You have sent the ${rule.limit} messages per hour this assistant answers for one person here (user_turns_per_hour).`;
  const whose =
    rule.name === 'user_cost_per_day' ? 'Your daily spending limit here (user_cost_per_day' : "This channel's daily spending limit (channel_cost_per_day";
  const state = why === 'busy' ? 'has too little left for another answer while others are in progress' : 'is used up';
  return `${whose}: ${formatAmount(round(settled))} of ${formatAmount(rule.limit)}) ${state}.`;
}

function round(n: number): number {
  return Math.round(n * 1e6) / 1e6;
}
