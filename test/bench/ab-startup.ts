import { asBefore, Fleet, spawnBareSdkBot } from './fleet.js';
import { median } from './report.js';
import { type Ready, readyAfterMs } from './scenarios/startup.js';

/**
 * `npx tsx test/bench/ab-startup.ts BEFORE_SCRIPT [ROUNDS] [webchat]`: the start-up scenario (four
 * channels on fakes, or with `webchat` the web chat alone; spawn → /readyz 200) for two builds of
 * channeld side by side, interleaved with the
 * bare SDK process (before, bare, after, before …), all against one set of fakes. BEFORE_SCRIPT is
 * the bundle of the other build (absolute path); "after" is this tree's build as the unit runs it.
 * AB_BEFORE_ENV and AB_BEFORE_NODE_ARGS launch the before side with other settings (fleet.ts,
 * asBefore). Prints every sample, then medians of wall time and of CPU until ready, and both
 * ratios to bare.
 */
async function main(): Promise<void> {
  const [before, rounds = '9', only] = process.argv.slice(2);
  if (!before || (only !== undefined && only !== 'webchat')) throw new Error('usage: ab-startup.ts BEFORE_SCRIPT [ROUNDS] [webchat]');
  const fleet = await new Fleet().start();
  const sides: Record<'before' | 'bare' | 'after', Ready[]> = { before: [], bare: [], after: [] };
  const daemon = (script?: string) =>
    readyAfterMs(() => {
      const p = fleet.spawn(script ? { script } : {});
      return { pid: p.child.pid!, kill: () => p.signal('SIGTERM'), exited: p.exited, port: p.url(30_000).then((u) => Number(new URL(u).port)) };
    });
  try {
    fleet.write(only ? { only } : {});
    for (let r = 0; r < Number(rounds); r++) {
      sides.before.push(await asBefore(() => daemon(before)));
      sides.bare.push(
        await readyAfterMs(() => {
          const { child, exited, port } = spawnBareSdkBot(fleet);
          return { pid: child.pid!, kill: () => child.kill('SIGTERM'), exited, port };
        }),
      );
      sides.after.push(await daemon());
      const last = (k: keyof typeof sides) => sides[k].at(-1)!;
      console.log(
        `round ${r + 1}: ${(['before', 'bare', 'after'] as const).map((k) => `${k} ${last(k).wallMs.toFixed(0)} ms (CPU ${last(k).cpuMs} ms)`).join(' | ')}`,
      );
    }
  } finally {
    await fleet.close();
  }
  const wall = (k: keyof typeof sides) => median(sides[k].map((x) => x.wallMs));
  const cpu = (k: keyof typeof sides) => median(sides[k].map((x) => x.cpuMs));
  for (const k of ['before', 'after', 'bare'] as const) {
    console.log(
      `${k}: ready in ${wall(k).toFixed(0)} ms, CPU ${cpu(k).toFixed(0)} ms` +
        (k === 'bare' ? '' : `; ratio to bare ${(wall(k) / wall('bare')).toFixed(2)}× wall, ${(cpu(k) / cpu('bare')).toFixed(2)}× CPU`),
    );
  }
}

await main();
