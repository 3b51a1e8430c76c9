import { waitFor } from '../../helpers/daemon.js';
import { FakeLlm } from '../../fakes/llm/server.js';
import { Fleet } from '../fleet.js';
import { percentile, type Row, type ScenarioOptions } from '../report.js';

/**
 * Latency from the fake platform emitting a message to the first visible draft and to the
 * final text, through Telegram with a streaming fake LLM (8 chunks, 40 ms apart). The final
 * text is paced by Telegram's one-edit-a-second floor, which dominates it.
 */
export async function latency(o: ScenarioOptions): Promise<Row[]> {
  const n = o.smoke ? 2 : 40;
  const llm = new FakeLlm();
  await llm.start();
  const fleet = await new Fleet().start();
  const first: number[] = [];
  const final: number[] = [];
  try {
    fleet.write({ streamMode: 'partial', agent: `[agent]\nprovider = "openai-compatible"\nbase_url = "${llm.url}"\nmodel = "m"\n` });
    const p = fleet.spawn();
    try {
      await waitFor(() => fleet.tg.callsOf('getUpdates').length > 0, 30_000);
      const answer = 'one two three four five six seven eight';
      for (let i = 0; i < n; i++) {
        llm.script({ kind: 'stream', chunks: answer.split(' ').map((w, j) => ({ content: j ? ` ${w}` : w, delayMs: 40 })) });
        const chat = 5000 + i;
        const t0 = Date.now();
        fleet.tg.dm(`question ${i}`, { id: chat, first_name: 'u' });
        await waitFor(() => fleet.tg.texts(chat).length > 0, 30_000, 1);
        first.push(Date.now() - t0);
        await waitFor(() => fleet.tg.texts(chat)[0] === answer, 30_000, 1);
        final.push(Date.now() - t0);
      }
    } finally {
      p.signal('SIGTERM');
      await p.exited;
    }
  } finally {
    await fleet.close();
    await llm.close();
  }
  return [
    { scenario: 'latency', metric: 'message → first visible draft, p50', value: percentile(first, 50), unit: 'ms' },
    { scenario: 'latency', metric: 'message → first visible draft, p99', value: percentile(first, 99), unit: 'ms' },
    { scenario: 'latency', metric: 'message → final text, p50 (1 s edit floor)', value: percentile(final, 50), unit: 'ms' },
    { scenario: 'latency', metric: 'message → final text, p99', value: percentile(final, 99), unit: 'ms' },
  ];
}
