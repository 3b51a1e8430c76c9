import { z } from 'zod';
import { startOfUtcDay } from '../../store/usage-ledger.js';
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
const quotaUse = z.object({ limit: z.string(), channel: z.string(), sender: z.string().nullable(), used: z.number() });
const channelUse = z.object({ channel: z.string(), turns: z.number(), cost: z.number() });
const report = z.object({
  since: z.string(),
  until: z.string().nullable(),
  rows: z.array(row),
  total: totals,
  /** The period's channels by cost, then turns (top 10). */
  top_channels: z.array(channelUse),
  /** Each quota's current window: the senders and channels that used most of it (top 10 each). */
  top_quota_users: z.array(quotaUse),
});
const standing = z.object({ limit: z.string(), used: z.number(), max: z.number(), resets_at: z.string() });
const conversationReport = z.object({
  conversation: totals,
  today: totals,
  agent: z.string(),
  budget: z.object({ daily: z.number(), spent_today: z.number(), left: z.number() }).nullable(),
  /** The sender's own standing against the channel's quotas. */
  quotas: z.array(standing),
});

const TOP = 10;

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
  slash: { help: "tokens and cost: this conversation's and today's totals, and where you stand against the quotas" },
  handler: async (input, { api, caller }) => {
    if (caller.face === 'slash') {
      return {
        agent: caller.agent,
        conversation: (await api.usage({ scope: caller.scope })).total,
        today: (await api.usage({ agent: caller.agent, sinceMs: startOfUtcDay() })).total,
        budget: api.budget(caller.agent) ?? null,
        quotas: await api.quotaStanding(caller.agent, caller.channelId, caller.senderId),
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
    const channels = new Map<string, { channel: string; turns: number; cost: number }>();
    for (const r of rows) {
      const c = channels.get(r.channel) ?? { channel: r.channel, turns: 0, cost: 0 };
      c.turns += r.turns;
      c.cost += r.cost;
      channels.set(r.channel, c);
    }
    const top_channels = [...channels.values()].sort((a, b) => b.cost - a.cost || b.turns - a.turns).slice(0, TOP);
    return {
      since: new Date(sinceMs).toISOString(),
      until: untilMs === undefined ? null : new Date(untilMs).toISOString(),
      rows,
      total,
      top_channels,
      top_quota_users: await api.quotaTop(TOP),
    };
  },
  format: (out) => {
    if ('conversation' in out) {
      const budget = out.budget ? `\nBudget today: ${formatAmount(out.budget.left)} of ${formatAmount(out.budget.daily)} left` : '';
      const quotas = out.quotas
        .map(
          (q) =>
            `\nYour ${q.limit}: ${q.limit.includes('cost') ? formatAmount(q.used) : q.used} of ${q.limit.includes('cost') ? formatAmount(q.max) : q.max} (resets ${q.resets_at.slice(11, 16)} UTC)`,
        )
        .join('');
      return `This conversation: ${line(out.conversation)}\nToday (agent ${out.agent}): ${line(out.today)}${budget}${quotas}`;
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
    const top = out.top_quota_users.map((q) => `${q.limit} ${q.channel}${q.sender ? ` ${q.sender}` : ''}: ${q.used}`);
    return `${head}\n\n${table(rows)}${top.length ? `\n\nquotas (current windows):\n${top.join('\n')}` : ''}`;
  },
});
