import { waitFor } from '../../helpers/daemon.js';
import { Fleet } from '../fleet.js';
import { percentile, type Row, type ScenarioOptions } from '../report.js';

/** Latency of one level: `level` conversations each send one message at once. */
interface Level {
  level: number;
  p50: number;
  p99: number;
}

/**
 * Sends one message in each of `level` fresh Telegram chats at the same moment and measures
 * message → final text for each (the fake's own timestamps of the sendMessage that answers).
 */
async function measure(fleet: Fleet, level: number, firstChat: number): Promise<number[]> {
  const before = fleet.tg.calls.length;
  const sentAt = new Map<number, number>();
  for (let i = 0; i < level; i++) {
    sentAt.set(firstChat + i, Date.now());
    fleet.tg.dm('load test answer', { id: firstChat + i, first_name: 'u' });
  }
  const answered = new Map<number, number>();
  await waitFor(
    () => {
      for (let i = before; i < fleet.tg.calls.length; i++) {
        const c = fleet.tg.calls[i]!;
        const chat = Number((c.body as { chat_id?: unknown }).chat_id);
        if (c.method === 'sendMessage' && sentAt.has(chat) && !answered.has(chat)) answered.set(chat, c.at - sentAt.get(chat)!);
      }
      return answered.size >= level;
    },
    300_000,
    5,
  );
  return [...answered.values()];
}

/**
 * The load curve: latency p50/p99 of message → final text at rising numbers of concurrent
 * conversations, with a model that takes 2 s to answer (the echo agent, three words 1 s apart),
 * and the first level where p99 is twice the single-conversation p99.
 */
export async function load(o: ScenarioOptions): Promise<Row[]> {
  const levels = o.smoke ? [1, 5] : [1, 10, 100, 300, 1000];
  const fleet = await new Fleet().start();
  const results: Level[] = [];
  try {
    // In-flight limits far above the levels: the curve shows the daemon, not a configured cap.
    fleet.write({ echoDelayMs: o.smoke ? 20 : 1000, maxInFlight: 5000 });
    const p = fleet.spawn();
    try {
      await waitFor(() => fleet.dc.connected && fleet.sl.socketOpen && fleet.tg.callsOf('getUpdates').length > 0, 30_000);
      let chat = 200_000;
      for (const level of levels) {
        // A single conversation is sampled several times, one after the other, for a steady floor.
        const samples: number[] = [];
        for (let r = 0; r < (level === 1 ? 5 : 1); r++) {
          samples.push(...(await measure(fleet, level, chat)));
          chat += level;
        }
        results.push({ level, p50: percentile(samples, 50), p99: percentile(samples, 99) });
      }
    } finally {
      p.signal('SIGTERM');
      await p.exited;
    }
  } finally {
    await fleet.close();
  }
  const floor = results[0]!.p99;
  const doubled = results.find((r) => r.p99 >= 2 * floor);
  return [
    ...results.flatMap((r) => [
      { scenario: 'load', metric: `${r.level} concurrent conversations, message → final, p50`, value: r.p50, unit: 'ms' },
      { scenario: 'load', metric: `${r.level} concurrent conversations, message → final, p99`, value: r.p99, unit: 'ms' },
    ]),
    {
      scenario: 'load',
      metric: doubled ? 'first level where p99 doubles' : `p99 never doubled up to ${levels.at(-1)} conversations`,
      value: doubled?.level ?? levels.at(-1)!,
      unit: 'conversations',
    },
  ];
}
