import { describe, expect, it } from 'vitest';
import type { Script } from '../fakes/llm/server.js';
import { waitFor } from '../helpers/daemon.js';
import { scaled } from '../helpers/timing.js';
import { withChat, withDaemon, withLlm } from '../helpers/fixtures.js';

const BUDGET = 0.0001;
const PRICE_PER_MTOK = 0.5;
const TURNS = 20;

describe('daily budget under concurrent turns', () => {
  it(
    `${TURNS} turns at once against a tiny budget spend at most one reservation past it; the refusals print its digits`,
    async () => {
      const llm = await withLlm();
      // Every answer waits until the test lets them go: all the turns that reach the model run at once.
      let release!: () => void;
      const released = new Promise<void>((r) => (release = r));
      const answer: Script = { kind: 'stream', chunks: [{ content: 'ok', after: released }], usage: { prompt_tokens: 40, completion_tokens: 20 } };
      llm.scriptFor('tiny-1', ...Array.from({ length: TURNS }, () => answer));
      const d = await withDaemon(`
[agent]
provider = "openai-compatible"
base_url = "${llm.url}"
model = "tiny-1"
system_prompt = "Be brief."
max_output_tokens = 20
daily_budget = ${BUDGET}

[models."tiny-1"]
price_in_per_mtok = ${PRICE_PER_MTOK}
price_out_per_mtok = ${PRICE_PER_MTOK}

[[channels]]
id = "web"
type = "webchat"
`);
      const tabs = await Promise.all(Array.from({ length: TURNS }, (_, i) => withChat(d, `tab${i}`)));
      for (const [i, t] of tabs.entries()) t.send(`question ${i}`);
      const refusal = /daily budget/;
      const refused = () => tabs.filter((t) => t.replies().some((f) => f.final && refusal.test(f.text ?? ''))).length;
      // Each turn either reached the model (and waits there) or was refused.
      await waitFor(() => llm.requests.length + refused() === TURNS, 30_000);
      release();
      await Promise.all(tabs.map((t) => t.finals(1, 30_000)));

      const usage = (await (await fetch(`${d.url}/actions/usage?since=today`)).json()) as { total: { turns: number; cost: number } };
      const perTurn = (60 * PRICE_PER_MTOK) / 1e6;
      expect(usage.total.turns).toBe(llm.requests.length);
      expect(usage.total.cost).toBeCloseTo(llm.requests.length * perTurn, 12);
      // A reservation is granted only where it fits, so it is at most the budget itself.
      expect(usage.total.cost).toBeLessThanOrEqual(2 * BUDGET);
      expect(llm.requests.length).toBeGreaterThan(0);
      expect(refused()).toBeGreaterThan(0);
      const texts = tabs.flatMap((t) =>
        t
          .replies()
          .filter((f) => f.final && refusal.test(f.text ?? ''))
          .map((f) => f.text!),
      );
      expect(texts.every((t) => t.includes(`of ${BUDGET}`))).toBe(true);
    },
    scaled(120_000),
  );
});
