import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Script } from '../fakes/llm/server.js';
import { waitFor } from '../helpers/daemon.js';
import { withChat, withDaemon, withLlm, withTempDir } from '../helpers/fixtures.js';
import { llmAgent, webchatChannel } from '../helpers/toml.js';

const almanac = join(import.meta.dirname, '../fixtures/plugins/almanac');

interface Totals {
  turns: number;
  input_tokens: number;
  output_tokens: number;
  cost: number;
}

/** Usage while a turn runs (C6): each model step counts as soon as the provider reports it. */
describe('live usage during a turn', () => {
  it("/usage and the usage action show a running turn's first step while its tool runs; the stored turn replaces it", async () => {
    const llm = await withLlm();
    const release = join(withTempDir('usage-live'), 'release');
    const d = await withDaemon(
      `${llmAgent(llm.url, 'm')}[models."m"]\nprice_in_per_mtok = 1000\nprice_out_per_mtok = 10000\n\n${webchatChannel()}`,
      {},
      `plugins = ["${almanac}"]`,
    );
    const asker = await withChat(d, 'asker');
    const watcher = await withChat(d, 'watcher');
    // Two model steps: the first calls `hold`, which runs until the test writes `release`.
    const hold: Script = {
      kind: 'stream',
      chunks: [{ toolCalls: [{ id: 'call_1', name: 'hold', arguments: JSON.stringify({ until: release }) }] }],
      usage: { prompt_tokens: 100, completion_tokens: 10 },
    };
    llm.script(
      { ...hold, usage: { prompt_tokens: 100, completion_tokens: 10 } },
      { kind: 'stream', chunks: [{ content: 'Released.' }], usage: { prompt_tokens: 150, completion_tokens: 20 } },
    );
    asker.send('hold on');
    await waitFor(() => d.daemon.turns().length === 1);
    const total = async () => ((await (await fetch(`${d.url}/actions/usage?since=today`)).json()) as { total: Totals }).total;

    // The tool is still running: the first step's tokens (and cost) are already counted.
    const running = await waitFor(async () => {
      const t = await total();
      return t.input_tokens > 0 ? t : undefined;
    }, 15_000);
    expect(running).toEqual(expect.objectContaining({ turns: 1, input_tokens: 100, output_tokens: 10, cost: 0.2 }));
    expect(d.daemon.turns()).toHaveLength(1);
    // A user's /usage (another conversation of the same agent) sees the running turn in today's totals.
    watcher.send('/usage');
    const [usage] = await watcher.finals(1, 15_000);
    expect(usage!.text).toContain('Today (agent default): 1 turn(s), 100 in, 10 out, cost 0.2000');

    writeFileSync(release, '');
    await asker.finals(1, 20_000);
    // Ended: one stored turn with both steps, the running view gone (not counted twice).
    await waitFor(async () => (await total()).input_tokens === 250, 10_000);
    expect(await total()).toEqual(expect.objectContaining({ turns: 1, input_tokens: 250, output_tokens: 30 }));
  });
});
