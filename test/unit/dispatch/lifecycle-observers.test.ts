import { afterEach, describe, expect, it } from 'vitest';
import type { Metrics } from '../../../src/observe/metrics.js';
import { waitFor } from '../../helpers/daemon.js';
import { pipeline, type Pipeline } from '../../helpers/pipeline.js';
import { userMessage } from '../../helpers/recording-adapter.js';

const slow = `[agent]\nprovider = "echo"\necho_delay_ms = 40\n`;
const words = (tag: string) => Array.from({ length: 10 }, (_, i) => `${tag}${i}`).join(' ');

async function gauges(metrics: Metrics): Promise<{ queued: number; inFlight: number; refused: number }> {
  const value = async (m: { get(): Promise<{ values: { value: number }[] }> }) => (await m.get()).values.reduce((n, v) => n + v.value, 0);
  return { queued: await value(metrics.queued), inFlight: await value(metrics.inFlight), refused: await value(metrics.refused) };
}

function states(p: Pipeline): string[] {
  return (p.db.prepare('SELECT state FROM inbox ORDER BY id').all() as { state: string }[]).map((r) => r.state);
}

describe('what the lifecycle tells its observers, seen through the dispatcher', () => {
  let p: Pipeline | undefined;
  afterEach(async () => {
    await p?.close();
    p = undefined;
  });

  it('the gauges and the task tracker follow every item in and out, refusals count once', async () => {
    p = pipeline(`${slow}\n[limits]\nmax_in_flight = 1\nmax_queued = 2\n`);
    for (const tag of ['a', 'b', 'c', 'd']) await p.dispatcher.deliver(userMessage('t', words(tag), { messageId: `m-${tag}` }));
    expect(await gauges(p.metrics)).toEqual({ queued: 2, inFlight: 1, refused: 1 });
    expect(p.dispatcher.tracker.list().map((t) => t.state)).toEqual(['running', 'queued', 'queued']);
    await waitFor(() => p!.dispatcher.snapshot().inFlight === 0 && p!.dispatcher.snapshot().queued === 0, 10_000);
    expect(await gauges(p.metrics)).toEqual({ queued: 0, inFlight: 0, refused: 1 });
    expect(p.dispatcher.tracker.list()).toEqual([]);
    expect(states(p)).toEqual(['done', 'done', 'done', 'refused']);
  });

  it('collected items are one tracked turn; dropped ones leave the tracker and the gauge', async () => {
    p = pipeline(`${slow}\n[limits]\ncollect_debounce_ms = 50\n`, 'queue_mode = "collect"\n');
    await p.dispatcher.deliver(userMessage('t', words('a'), { messageId: 'm-a' }));
    await p.dispatcher.deliver(userMessage('t', 'b', { messageId: 'm-b' }));
    await p.dispatcher.deliver(userMessage('t', 'c', { messageId: 'm-c' }));
    expect((await gauges(p.metrics)).queued).toBe(2);
    // b and c wait for a; the operator drops c.
    const [, , c] = p.db.prepare('SELECT id FROM inbox ORDER BY id').all() as { id: number }[];
    expect(p.dispatcher.stopTurn(String(c!.id))).toBe('dropped');
    expect((await gauges(p.metrics)).queued).toBe(1);
    await waitFor(() => p!.dispatcher.snapshot().inFlight === 0 && p!.dispatcher.snapshot().queued === 0, 10_000);
    expect(await gauges(p.metrics)).toEqual({ queued: 0, inFlight: 0, refused: 0 });
    expect(p.dispatcher.tracker.list()).toEqual([]);
    expect(states(p)).toEqual(['done', 'done', 'failed']);
  });
});
