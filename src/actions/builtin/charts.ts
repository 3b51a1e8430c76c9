import { z } from 'zod';
import { RING_MINUTES } from '../../observe/minute-figures.js';
import { defineAction } from '../action.js';

const values = z.array(z.number());
const optional = z.array(z.number().nullable());
const bySeries = z.record(z.string(), values);

/**
 * The /admin charts' data: per minute of the last `minutes` (at most 24 h), messages and
 * turns, turn and first-visible-update latency (p50, p99 from fixed buckets), tokens and
 * cost per agent, refusals by reason. In cluster mode, every instance's minutes added up.
 */
export const chartsAction = defineAction({
  name: 'charts',
  description: 'per-minute figures of the last 24 h (messages, turns, latency p50/p99, tokens and cost per agent, refusals by reason)',
  input: z.object({ minutes: z.coerce.number().int().min(1).max(RING_MINUTES).default(RING_MINUTES) }),
  output: z.object({
    minute_ms: z.number(),
    t: values,
    messages: values,
    turns: values,
    turn_p50_ms: optional,
    turn_p99_ms: optional,
    first_visible_p50_ms: optional,
    first_visible_p99_ms: optional,
    tokens: bySeries,
    cost: bySeries,
    refusals: bySeries,
  }),
  readOnly: true,
  cli: { optionalArgs: ['minutes'] },
  handler: (input, { api }) => api.charts(input.minutes),
  format: (out) => {
    const sum = (a: number[]) => a.reduce((x, y) => x + y, 0);
    const total = (m: Record<string, number[]>) =>
      Object.entries(m)
        .map(([k, s]) => `${k} ${Math.round(sum(s) * 1e6) / 1e6}`)
        .join(', ') || 'none';
    return [
      `last ${out.t.length} min: ${sum(out.messages)} messages, ${sum(out.turns)} turns`,
      `tokens by agent: ${total(out.tokens)}`,
      `cost by agent: ${total(out.cost)}`,
      `refusals by reason: ${total(out.refusals)}`,
    ].join('\n');
  },
});
