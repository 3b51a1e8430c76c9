import { describe, expect, it } from 'vitest';
import { Metrics } from '../../../src/observe/metrics.js';

/** Turn usage is added up between scrapes and folded into the counters when they are read. */
describe('usage metrics', () => {
  const turn = { agent: 'a', model: 'm', channel: 'web', inputTokens: 10, outputTokens: 5, reasoningTokens: 0, cachedTokens: 2, cost: 0.5 };

  it('sums turns per agent, model and channel, once, however often the metrics are read', async () => {
    const metrics = new Metrics(false);
    metrics.recordUsage(turn);
    metrics.recordUsage({ ...turn, inputTokens: 1, cost: 0.25 });
    metrics.recordUsage({ ...turn, channel: 'tg', cost: null });
    const first = await metrics.registry.metrics();
    expect(first).toContain('channeld_tokens_total{agent="a",model="m",channel="web",type="input"} 11');
    expect(first).toContain('channeld_tokens_total{agent="a",model="m",channel="web",type="cached"} 4');
    expect(first).toContain('channeld_tokens_total{agent="a",model="m",channel="web",type="reasoning"} 0');
    expect(first).toContain('channeld_cost_total{agent="a",model="m",channel="web"} 0.75');
    expect(first).toContain('channeld_tokens_total{agent="a",model="m",channel="tg",type="output"} 5');
    // An unpriced model makes no cost series.
    expect(first).not.toContain('channeld_cost_total{agent="a",model="m",channel="tg"}');
    // Read again: the same totals, not twice them.
    expect(await metrics.registry.metrics()).toBe(first);
    metrics.recordUsage(turn);
    expect(await metrics.registry.metrics()).toContain('channeld_tokens_total{agent="a",model="m",channel="web",type="input"} 21');
  });

  it('each counter read on its own sees every turn recorded before it', async () => {
    const metrics = new Metrics(false);
    metrics.recordUsage(turn);
    expect((await metrics.cost.get()).values).toEqual([expect.objectContaining({ value: 0.5, labels: { agent: 'a', model: 'm', channel: 'web' } })]);
    expect((await metrics.tokens.get()).values).toHaveLength(4);
  });
});
