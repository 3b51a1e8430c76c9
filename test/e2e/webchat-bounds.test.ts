import { describe, expect, it } from 'vitest';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import { withChat, withDaemon } from '../helpers/fixtures.js';
import { echoAgent, webchatChannel } from '../helpers/toml.js';

const config = (keys: string) => echoAgent(0) + webchatChannel('web', keys);

async function evictions(d: TestDaemon): Promise<number> {
  const text = await (await fetch(`${d.url}/metrics`)).text();
  return Number(/channeld_memory_evictions_total\{structure="webchat_backlog"\} (\d+)/.exec(text)?.[1] ?? 0);
}

describe('web chat backlogs are bounded', () => {
  let d: TestDaemon | undefined;

  let seq = 0;
  const chat = async (tab: string, text: string) => {
    const c = await withChat(d!, tab);
    c.send(text, `msg-${++seq}`); // a reconnected tab's ids must not repeat (the inbox would drop them)
    await c.finals(1, 10_000);
    return c;
  };

  it('past backlog_max_tabs the least recently used closed tab is forgotten; evictions show in /metrics', async () => {
    d = await withDaemon(config('backlog_max_tabs = 3\n'));
    for (let i = 0; i < 6; i++) (await chat(`tab-${i}`, `hello ${i}`)).close();
    await waitFor(async () => (await evictions(d!)) >= 3, 10_000);
    // A forgotten tab comes back to nothing kept: the first reply frame it sees is its new answer.
    const back = await chat('tab-0', 'again');
    expect(back.replies().map((f) => f.text)).not.toContain('hello 0');
    expect(back.replies().at(-1)!.text).toBe('again');
    // A recent one still finds its reply.
    const recent = await chat('tab-5', 'and me');
    expect(recent.replies()[0]!.text).toBe('hello 5');
  });

  it('past backlog_max_bytes the oldest replies go', async () => {
    d = await withDaemon(config('backlog_max_bytes = 20000\n'));
    const long = (i: number) => Array.from({ length: 700 }, (_, k) => `w${i}-${k}`).join(' ');
    for (let i = 0; i < 5; i++) (await chat(`tab-${i}`, long(i))).close();
    await waitFor(async () => (await evictions(d!)) >= 1, 10_000);
    const back = await chat('tab-4', 'still here');
    expect(back.replies()[0]!.text).toBe(long(4));
  });
});
