import { z } from 'zod';
import { startOfUtcDay } from '../../store/usage.js';
import { defineAction } from '../action.js';
import { CodedError } from '../../contracts/errors.js';
import { table } from '../table.js';
import { formatAmount } from '../../util/money.js';

const totals = z.object({
  turns: z.number(),
  input_tokens: z.number(),
  output_tokens: z.number(),
  reasoning_tokens: z.number(),
  cached_tokens: z.number(),
  estimated_turns: z.number(),
  cost: z.number(),
});
const row = totals.extend({ channel: z.string(), agent: z.string(), model: z.string() });
const report = z.object({ since: z.string(), until: z.string().nullable(), rows: z.array(row), total: totals });
const conversationReport = z.object({
  conversation: totals,
  today: totals,
  agent: z.string(),
  budget: z.object({ daily: z.number(), spent_today: z.number(), left: z.number() }).nullable(),
});

/** `today` (since 00:00 UTC), `24h`, `7d`, or an ISO date or date-time. */
export function parseSince(since: string, nowMs = Date.now()): number {
  if (since === 'today') return startOfUtcDay(nowMs);
  const rel = /^(\d+)([hd])$/.exec(since);
  if (rel) return nowMs - Number(rel[1]) * (rel[2] === 'h' ? 3_600_000 : 86_400_000);
  const at = Date.parse(since);
  if (Number.isNaN(at)) throw new CodedError('ACTION_INPUT_INVALID', `since: "${since}" is not today, Nh, Nd or an ISO date`);
  return at;
}

type Totals = z.output<typeof totals>;
const line = (t: Totals) =>
  `${t.turns} turn(s), ${t.input_tokens} in, ${t.output_tokens} out${t.reasoning_tokens ? ` (${t.reasoning_tokens} reasoning)` : ''}${t.cached_tokens ? `, ${t.cached_tokens} cached` : ''}${t.estimated_turns ? `, ${t.estimated_turns} estimated` : ''}, cost ${t.cost.toFixed(4)}`;

/**
 * Token usage and cost. Operators get it per channel, agent and model over a period; a chat
 * user (/usage) gets their conversation's totals and the agent's today.
 */
export const usageAction = defineAction({
  name: 'usage',
  description: 'token usage and cost per channel, agent and model (since: today, 24h, 7d or an ISO date)',
  input: z.object({
    since: z.string().default('today'),
    until: z.string().optional(),
    channel: z.string().optional(),
    agent: z.string().optional(),
    model: z.string().optional(),
  }),
  output: z.union([conversationReport, report]),
  readOnly: true,
  cli: { optionalArgs: ['since'] },
  slash: { help: "tokens and cost: this conversation's and today's totals" },
  handler: async (input, { api, caller }) => {
    if (caller.face === 'slash') {
      return {
        agent: caller.agent,
        conversation: (await api.usage({ scope: caller.scope })).total,
        today: (await api.usage({ agent: caller.agent, sinceMs: startOfUtcDay() })).total,
        budget: api.budget(caller.agent) ?? null,
      };
    }
    const sinceMs = parseSince(input.since);
    const untilMs = input.until === undefined ? undefined : parseSince(input.until);
    const { rows, total } = await api.usage({
      sinceMs,
      ...(untilMs !== undefined ? { untilMs } : {}),
      ...(input.channel ? { channel: input.channel } : {}),
      ...(input.agent ? { agent: input.agent } : {}),
      ...(input.model ? { model: input.model } : {}),
    });
    return { since: new Date(sinceMs).toISOString(), until: untilMs === undefined ? null : new Date(untilMs).toISOString(), rows, total };
  },
  format: (out) => {
    if ('conversation' in out) {
      const budget = out.budget ? `\nBudget today: ${formatAmount(out.budget.left)} of ${formatAmount(out.budget.daily)} left` : '';
      return `This conversation: ${line(out.conversation)}\nToday (agent ${out.agent}): ${line(out.today)}${budget}`;
    }
    const head = `usage since ${out.since}${out.until ? ` until ${out.until}` : ''}`;
    if (!out.rows.length) return `${head}: no turns`;
    const rows = [['CHANNEL', 'AGENT', 'MODEL', 'TURNS', 'IN', 'OUT', 'REASONING', 'CACHED', 'ESTIMATED', 'COST']];
    for (const r of [...out.rows, { ...out.total, channel: 'total', agent: '', model: '' }]) {
      rows.push([
        r.channel,
        r.agent,
        r.model,
        String(r.turns),
        String(r.input_tokens),
        String(r.output_tokens),
        String(r.reasoning_tokens),
        String(r.cached_tokens),
        String(r.estimated_turns),
        r.cost.toFixed(4),
      ]);
    }
    return `${head}\n\n${table(rows)}`;
  },
});
