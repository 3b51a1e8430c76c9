import { describe, expect, it } from 'vitest';
import type { TurnContext } from '../../../src/contracts/turn.js';
import { LiveUsage, withRunning } from '../../../src/workspace/live-usage.js';

const turn = (inputTokens: number, outputTokens: number) => ({ stepUsage: { inputTokens, outputTokens, estimated: false } }) as unknown as TurnContext;

describe('LiveUsage: running turns in /usage', () => {
  const live = new LiveUsage(() => ({ m: { input: ['text'], price_in_per_mtok: 1000, price_out_per_mtok: 10000 } }));
  const a = turn(100, 10);
  live.add(a, { agent: 'alpha', model: 'm', channel: 'web', scope: 'web:1' });
  // A turn with no step reported yet adds nothing, not even a turn.
  live.add(turn(0, 0), { agent: 'alpha', model: 'm', channel: 'web', scope: 'web:2' });

  it('counts the steps reported so far, priced, under the filter and period', () => {
    expect(live.breakdown({ agent: 'alpha' })).toEqual([
      {
        channel: 'web',
        agent: 'alpha',
        model: 'm',
        turns: 1,
        input_tokens: 100,
        output_tokens: 10,
        reasoning_tokens: 0,
        cached_tokens: 0,
        estimated_turns: 0,
        cost: 0.2,
      },
    ]);
    expect(live.breakdown({ scope: 'web:2' })).toEqual([]);
    expect(live.breakdown({ agent: 'beta' })).toEqual([]);
    expect(live.breakdown({ untilMs: 1000 }, 2000)).toEqual([]);
  });

  it('adds to the stored rows, and is gone once the turn is removed (counted once)', () => {
    const stored = {
      rows: [
        {
          channel: 'web',
          agent: 'alpha',
          model: 'm',
          turns: 2,
          input_tokens: 5,
          output_tokens: 5,
          reasoning_tokens: 0,
          cached_tokens: 0,
          estimated_turns: 0,
          cost: 1,
        },
      ],
      total: { turns: 2, input_tokens: 5, output_tokens: 5, reasoning_tokens: 0, cached_tokens: 0, estimated_turns: 0, cost: 1 },
    };
    expect(withRunning(stored, live.breakdown({})).total).toMatchObject({ turns: 3, input_tokens: 105, output_tokens: 15, cost: 1.2 });
    live.remove(a);
    expect(withRunning(stored, live.breakdown({}))).toBe(stored);
  });
});
