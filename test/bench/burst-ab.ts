import { asBefore } from './fleet.js';
import { median } from './report.js';
import { channeldSide, measure, type Side } from './scenarios/load.js';

/**
 * `npx tsx test/bench/burst-ab.ts BEFORE_SCRIPT [ROUNDS] [N] [LULL_MS]` (after `npm run build`): the load
 * curve's burst, two builds side by side with many samples. Both daemons run at once, each on
 * its own fakes, as the unit runs them (the load curve's own sides and measurement); in each
 * round each answers one burst of N fresh conversations (default 1,000; the echo agent's three
 * words 1 s apart), the two taking turns going first, until every final text landed, then a
 * pause. One uncounted round warms them up. Prints each burst's first visible and turn p99, then
 * the medians for each build, apart for the bursts it answered first and second: the side that
 * goes second answers right after the other daemon's burst (whose leftovers, collection among
 * them, share the 2 cores), which cost it about 140-200 ms of first visible p99
 * (docs/PERFORMANCE.md, fourteenth round), more than most changes are worth. "after" is this
 * tree's build as the unit runs it; AB_BEFORE_ENV and AB_BEFORE_NODE_ARGS launch the before side
 * with other settings (fleet.ts, asBefore). A single `load` run cannot tell such a change from the noise.
 * Each burst's CPU time (the daemon's, all threads, from the burst until its last final text)
 * is reported too, with its median per side. The latencies here are far noisier than they look:
 * two A/A runs (the same build on both sides, fifteenth round) gave first visible p99 medians
 * 40 and 97 ms apart, and one change measured twice came out 136 ms better and 121 ms worse.
 * The CPU medians of the second A/A run were 3 % apart (single bursts 760-1,840 ms, as major
 * collections fall): a change must move them by clearly more before it counts. The CPU figure
 * is read in 10 ms clock ticks, holds what the previous burst left to collect (bursts are
 * LULL_MS apart, default 1.5 s), and spans the whole wait when an answer never came. As the
 * order alternates, each daemon's own bursts are alternately one lull apart and three lulls
 * and two bursts apart: with LULL_MS=6000 about 6 and 23 s, the longer one past the memory
 * trimmer's old 5 s and within its 30 s (sixteenth round).
 */
async function main(): Promise<void> {
  const [before, rounds = '10', count = '1000', lull = '1500'] = process.argv.slice(2);
  // An even number of rounds, so each side goes first as often as second.
  if (!before || Number(rounds) < 2 || Number(rounds) % 2 || !(Number(lull) >= 0))
    throw new Error('usage: burst-ab.ts BEFORE_SCRIPT [ROUNDS, even, at least 2] [N] [LULL_MS, default 1500]');
  const n = Number(count);
  const sides: Side[] = [];
  const bursts = new Map<string, Array<{ firstP99: number; turnP99: number; cpuMs: number; wentFirst: boolean }>>();
  try {
    sides.push(await asBefore(() => channeldSide('before', 1000, { script: before })));
    sides.push(await channeldSide('after', 1000));
    let chat = 100_000;
    for (let r = -1; r < Number(rounds); r++) {
      const order = r % 2 === 0 ? sides : [...sides].reverse();
      for (const [i, side] of order.entries()) {
        const b = await measure(side.target, n, chat, 120_000);
        chat += n;
        if (r >= 0) {
          bursts.set(side.name, [...(bursts.get(side.name) ?? []), { firstP99: b.firstP99, turnP99: b.p99, cpuMs: b.cpuMs, wentFirst: i === 0 }]);
          console.log(
            `round ${r + 1} ${side.name}${i === 0 ? ' (first)' : ''}: first visible p99 ${b.firstP99} ms, turn p99 ${b.p99} ms` +
              (b.missing + b.errors ? `, ${b.missing} answers missing, ${b.errors} error lines` : ''),
          );
        }
        // By default long enough for the turns' last writes; not for everything the burst left to collect.
        await new Promise((resolve) => setTimeout(resolve, Number(lull)));
      }
    }
  } finally {
    // Every side is stopped even when another's stop fails.
    await Promise.allSettled(sides.map((s) => s.close()));
  }
  for (const [name, all] of bursts) {
    const of = (wentFirst: boolean, k: 'firstP99' | 'turnP99') => median(all.filter((b) => b.wentFirst === wentFirst).map((b) => b[k]));
    console.log(
      `${name}: first visible p99 median ${median(all.map((b) => b.firstP99))} ms (going first ${of(true, 'firstP99')}, second ${of(false, 'firstP99')}), ` +
        `turn p99 median ${median(all.map((b) => b.turnP99))} ms (going first ${of(true, 'turnP99')}, second ${of(false, 'turnP99')}), ` +
        `CPU per burst median ${median(all.map((b) => b.cpuMs))} ms (${all.map((b) => b.cpuMs).join(' ')})`,
    );
  }
}

await main();
