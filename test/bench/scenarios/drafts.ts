import FakeTimers from '@sinonjs/fake-timers';
import { RecordingAdapter } from '../../helpers/recording-adapter.js';
import { streamOn } from '../../helpers/reply-stream.js';
import type { Row, ScenarioOptions } from '../report.js';

/**
 * Platform calls per reply for a 30 s answer at 20 tokens/s, on simulated time, against the
 * bound ceil(30 s / interval) + 2; and the delay from first token to first visible text.
 * Each platform call takes 150 ms, as a real API round trip would.
 */
export async function drafts(o: ScenarioOptions): Promise<Row[]> {
  const rows: Row[] = [];
  const seconds = o.smoke ? 3 : 30;
  for (const intervalMs of o.smoke ? [1000] : [1000, 3000]) {
    const clock = FakeTimers.install({ toFake: ['setTimeout', 'clearTimeout', 'Date'], now: 0 });
    try {
      const adapter = new RecordingAdapter('t', { minEditIntervalMs: intervalMs, maxMessageLength: 100_000 });
      const slow =
        <A extends unknown[], R>(fn: (...a: A) => Promise<R>) =>
        async (...a: A) => {
          await new Promise((r) => setTimeout(r, 150));
          return fn(...a);
        };
      adapter.send = slow(adapter.send.bind(adapter));
      adapter.edit = slow(adapter.edit.bind(adapter));
      const stream = streamOn(adapter);
      const firstTokenAt = Date.now();
      for (let i = 0; i < seconds * 20; i++) {
        stream.push({ type: 'text_delta', text: `token${i} ` });
        await clock.tickAsync(50);
      }
      stream.push({ type: 'done', usage: { inputTokens: 0, outputTokens: seconds * 20, estimated: true } });
      await clock.runAllAsync();
      const result = await stream.finished();
      const firstVisible = adapter.calls.find((c) => c.op === 'send')!.at;
      const bound = Math.ceil((seconds * 1000) / intervalMs) + 2;
      rows.push(
        {
          scenario: 'drafts',
          metric: `calls per ${seconds} s reply, interval ${intervalMs} ms`,
          value: result.requests,
          unit: 'calls',
          target: `≤ ${bound}`,
          met: result.requests <= bound,
        },
        { scenario: 'drafts', metric: `first token → first visible, interval ${intervalMs} ms`, value: firstVisible - firstTokenAt, unit: 'ms' },
      );
    } finally {
      clock.uninstall();
    }
  }
  return rows;
}
