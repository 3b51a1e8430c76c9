import { waitFor } from '../helpers/daemon.js';
import { Fleet } from './fleet.js';
import { median, percentile } from './report.js';

/**
 * `npx tsx test/bench/burst-ab.ts BEFORE_SCRIPT [ROUNDS] [N]` (after `npm run build`): the load
 * curve's burst, two builds side by side with many samples. Both daemons run at once, each on
 * its own fakes, as the unit runs them; in each round each answers one burst of N fresh
 * conversations (default 1,000; the echo agent's three words 1 s apart), the two taking turns
 * going first, until every final edit landed, then a pause. One uncounted round warms them up.
 * Prints each burst's first visible and turn p99, then the medians for each build, apart for
 * the bursts it answered first and second: the side that goes second answers right after the
 * other daemon's burst (whose leftovers, collection among them, share the 2 cores), which cost
 * it about 140-200 ms of first visible p99 (docs/PERFORMANCE.md, fourteenth round), more than
 * most changes are worth. "after" is this tree's dist/bundle/channeld.js. A single `load` run
 * cannot tell such a change from the noise.
 */
interface Side {
  name: string;
  fleet: Fleet;
  daemon: ReturnType<Fleet['spawn']>;
  /** Per counted burst: first visible p99, turn p99 (ms), and whether this side went first. */
  bursts: Array<{ firstP99: number; turnP99: number; wentFirst: boolean }>;
}

const TEXT = 'load test answer';

async function start(name: string, script: string): Promise<Side> {
  const fleet = await new Fleet().start();
  fleet.write({ echoDelayMs: 1000, maxInFlight: 12_000, streamMode: 'partial' });
  const side: Side = { name, fleet, daemon: fleet.spawn({ script }), bursts: [] };
  try {
    await waitFor(() => fleet.dc.connected && fleet.sl.socketOpen && fleet.tg.callsOf('getUpdates').length > 0, 60_000);
  } catch (err) {
    await stop(side);
    throw err;
  }
  return side;
}

async function stop(side: Side): Promise<void> {
  side.daemon.signal('SIGTERM');
  await side.daemon.exited;
  await side.fleet.close();
}

/**
 * One burst of `n` fresh chats from `firstChat` on; p99 of message → first message and →
 * final text (the first message or edit holding the whole answer, as the load curve counts it).
 */
async function burst(side: Side, n: number, firstChat: number): Promise<{ firstP99: number; turnP99: number; missing: number }> {
  const tg = side.fleet.tg;
  let cursor = tg.calls.length;
  const sentAt = Date.now();
  for (let i = 0; i < n; i++) tg.dm(TEXT, { id: firstChat + i, first_name: 'u' });
  const first = new Map<number, number>();
  const final = new Map<number, number>();
  try {
    await waitFor(
      () => {
        for (; cursor < tg.calls.length; cursor++) {
          const c = tg.calls[cursor]!;
          if (c.method !== 'sendMessage' && c.method !== 'editMessageText') continue;
          const chat = Number((c.body as { chat_id?: unknown }).chat_id);
          if (!(chat >= firstChat && chat < firstChat + n)) continue;
          if (c.method === 'sendMessage' && !first.has(chat)) first.set(chat, c.at - sentAt);
          if (String((c.body as { text?: unknown }).text).trim() === TEXT && !final.has(chat)) final.set(chat, c.at - sentAt);
        }
        return final.size >= n;
      },
      120_000,
      5,
    );
  } catch {
    // Reported as missing answers: the burst's other figures still count.
  }
  return { firstP99: percentile([...first.values()], 99), turnP99: percentile([...final.values()], 99), missing: n - final.size };
}

async function main(): Promise<void> {
  const [before, rounds = '10', count = '1000'] = process.argv.slice(2);
  // An even number of rounds, so each side goes first as often as second.
  if (!before || Number(rounds) < 2 || Number(rounds) % 2) throw new Error('usage: burst-ab.ts BEFORE_SCRIPT [ROUNDS, even, at least 2] [N]');
  const n = Number(count);
  const sides: Side[] = [];
  try {
    sides.push(await start('before', before));
    sides.push(await start('after', 'dist/bundle/channeld.js'));
    let chat = 100_000;
    for (let r = -1; r < Number(rounds); r++) {
      const order = r % 2 === 0 ? sides : [...sides].reverse();
      for (const [i, side] of order.entries()) {
        const b = await burst(side, n, chat);
        chat += n;
        if (r >= 0) {
          side.bursts.push({ firstP99: b.firstP99, turnP99: b.turnP99, wentFirst: i === 0 });
          console.log(
            `round ${r + 1} ${side.name}${i === 0 ? ' (first)' : ''}: first visible p99 ${b.firstP99} ms, turn p99 ${b.turnP99} ms` +
              (b.missing ? `, ${b.missing} answers missing` : ''),
          );
        }
        // Long enough for the turns' last writes; not for everything the burst left to collect.
        await new Promise((resolve) => setTimeout(resolve, 1500));
      }
    }
  } finally {
    // Every side is stopped even when another's stop fails.
    await Promise.allSettled(sides.map(stop));
  }
  for (const side of sides) {
    const of = (wentFirst: boolean, k: 'firstP99' | 'turnP99') => median(side.bursts.filter((b) => b.wentFirst === wentFirst).map((b) => b[k]));
    console.log(
      `${side.name}: first visible p99 median ${median(side.bursts.map((b) => b.firstP99))} ms (going first ${of(true, 'firstP99')}, second ${of(false, 'firstP99')}), ` +
        `turn p99 median ${median(side.bursts.map((b) => b.turnP99))} ms (going first ${of(true, 'turnP99')}, second ${of(false, 'turnP99')})`,
    );
  }
}

await main();
