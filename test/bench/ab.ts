import { asBefore } from './fleet.js';
import { median } from './report.js';
import { bareRun, channeldRun, type Run } from './scenarios/throughput.js';

/**
 * `npx tsx test/bench/ab.ts BEFORE_SCRIPT [ROUNDS] [N]`: the throughput scenario with two
 * builds of channeld side by side, interleaved with the bare grammy bot (before, bare, after,
 * before, bare, after …), each against its own fresh fakes. BEFORE_SCRIPT is the bundle of the
 * other build (e.g. a copy of dist/ made before a change); "after" is this tree's dist/.
 * AB_BEFORE_ENV ("NAME=VALUE ...", as BENCH_ENV in fleet.ts) and AB_BEFORE_NODE_ARGS launch the
 * "before" side with other environment variables or node flags than the unit's, to compare a
 * setting on one build (`AB_BEFORE_ENV=MALLOC_TRIM_THRESHOLD_=131072 npx tsx test/bench/ab.ts
 * dist/bundle/channeld.js 12`) or a build from before a change of them (fleet.ts, asBefore).
 * Prints every sample, then the medians: messages per second, CPU per message, both ratios.
 */
async function main(): Promise<void> {
  const [before, rounds = '5', count = '3000'] = process.argv.slice(2);
  if (!before) throw new Error('usage: ab.ts BEFORE_SCRIPT [ROUNDS] [N]');
  const n = Number(count);
  const m = 50;
  const warm = 300;
  const sides: Record<'before' | 'bare' | 'after', Run[]> = { before: [], bare: [], after: [] };
  for (let r = 0; r < Number(rounds); r++) {
    sides.before.push(await asBefore(() => channeldRun(n, m, warm, true, before)));
    sides.bare.push(await bareRun(n, m, warm));
    sides.after.push(await channeldRun(n, m, warm));
    const last = (k: keyof typeof sides) => sides[k].at(-1)!;
    console.log(
      `round ${r + 1}: ` +
        (['before', 'bare', 'after'] as const).map((k) => `${k} ${last(k).rate.toFixed(0)} msg/s ${last(k).cpuPerMsgMs.toFixed(3)} ms`).join(' | '),
    );
  }
  const rate = (k: keyof typeof sides) => median(sides[k].map((x) => x.rate));
  const cpu = (k: keyof typeof sides) => median(sides[k].map((x) => x.cpuPerMsgMs));
  const ratios = (k: 'before' | 'after') => sides[k].map((x, i) => x.rate / sides.bare[i]!.rate);
  const cpuRatios = (k: 'before' | 'after') => sides[k].map((x, i) => x.cpuPerMsgMs / sides.bare[i]!.cpuPerMsgMs);
  for (const k of ['before', 'after'] as const) {
    const rr = ratios(k);
    const cr = cpuRatios(k);
    console.log(
      `${k}: ${rate(k).toFixed(0)} msg/s, CPU ${cpu(k).toFixed(3)} ms/msg; ratio of medians ${(rate(k) / rate('bare')).toFixed(2)}× ` +
        `(per round ${Math.min(...rr).toFixed(2)}–${Math.max(...rr).toFixed(2)}), CPU ${(cpu(k) / cpu('bare')).toFixed(2)}× (per round ${Math.min(...cr).toFixed(2)}–${Math.max(...cr).toFixed(2)})`,
    );
  }
  console.log(`bare: ${rate('bare').toFixed(0)} msg/s, CPU ${cpu('bare').toFixed(3)} ms/msg`);
}

await main();
