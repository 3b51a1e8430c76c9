import { existsSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { waitFor } from '../helpers/daemon.js';
import type { FakeTelegram } from '../fakes/telegram/server.js';
import { median } from './report.js';
import { drive, withBareBot, withChanneld } from './scenarios/throughput.js';

/**
 * `npm run bench:alloc [N] [ROUNDS] [--unbundled] [--survivors]`: bytes allocated per message in the
 * throughput workload (N DMs over 50 chats after 300 of warm-up), channeld (as the unit runs
 * it) and the bare grammy echo bot side by side, interleaved, from V8's sampling heap profiler
 * (every 4 KiB on average, collected objects included). Allocation is what the garbage
 * collector works through, on the main thread and its helper threads, and unlike CPU time it
 * barely moves with the machine's load, so a cut shows here even when the CPU figures are
 * noisy. Then channeld's allocations by the nearest frame of its own code (`--unbundled` runs
 * dist/bin/channeld.js, so frames name their source files instead of the bundle's chunks).
 * `--survivors` counts only what outlived a young-generation collection: the bytes promoted to
 * the old generation, which set how often the major collections run (their marking is most of
 * what V8's helper threads spend, `test/bench/threads.ts`). Timing moves it more than it moves
 * the total: compare builds over several rounds.
 */
interface Frame {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: Frame[];
}

const samplerFile = pathToFileURL(join(import.meta.dirname, 'alloc-sampler.mjs')).href;

/** Starts the sampler (the warm-up done), drives the timed messages, stops it; returns the profile's root. */
async function sampled(pid: number, tg: FakeTelegram, n: number, m: number): Promise<Frame> {
  const out = join(tmpdir(), `channeld-alloc-${pid}.json`);
  rmSync(out, { force: true });
  await drive(tg, 300, m, 'warm');
  process.kill(pid, 'SIGURG');
  // The signal is handled on the target's event loop: give it a moment to start sampling.
  await new Promise((r) => setTimeout(r, 200));
  await drive(tg, n, m, 'run');
  process.kill(pid, 'SIGWINCH');
  await waitFor(() => existsSync(out), 30_000);
  await new Promise((r) => setTimeout(r, 200)); // written in one call, but let it finish
  const profile = JSON.parse(readFileSync(out, 'utf8')) as { head: Frame };
  rmSync(out, { force: true });
  return profile.head;
}

function channeld(n: number, m: number, unbundled: boolean, sampler: string): Promise<Frame> {
  return withChanneld({ nodeArgs: ['--import', sampler], ...(unbundled ? { script: 'dist/bin/channeld.js' } : {}) }, (pid, tg) => sampled(pid, tg, n, m));
}

function bare(n: number, m: number, sampler: string): Promise<Frame> {
  return withBareBot(['--import', sampler], (pid, tg) => sampled(pid, tg, n, m));
}

function total(f: Frame): number {
  return f.selfSize + f.children.reduce((a, c) => a + total(c), 0);
}

/** Bytes by the nearest frame of channeld's own code (dist/src, dist/channels, or the bundle's entry chunk) from the allocation up. */
function byOwnFrame(root: Frame): Array<[string, number]> {
  const out = new Map<string, number>();
  const walk = (f: Frame, own: string | undefined) => {
    const url = f.callFrame.url;
    const here = /dist\/(src|channels)\/|dist\/(bundle|builds)\/[^/]+\/(main|channeld)-/.test(url)
      ? `${f.callFrame.functionName || '(anonymous)'} ${url.replace(/^.*?\/dist\//, 'dist/')}:${f.callFrame.lineNumber + 1}`
      : own;
    if (f.selfSize) {
      const key = here ?? '(outside channeld: SDKs, Node)';
      out.set(key, (out.get(key) ?? 0) + f.selfSize);
    }
    for (const c of f.children) walk(c, here);
  };
  walk(root, undefined);
  return [...out].sort((a, b) => b[1] - a[1]);
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const unbundled = args.includes('--unbundled');
  const survivors = args.includes('--survivors');
  const sampler = survivors ? `${samplerFile}?survivors` : samplerFile;
  const what = survivors ? 'KB per message outlived a young-generation collection' : 'KB per message';
  const [count = '3000', rounds = '2'] = args.filter((a) => !a.startsWith('--'));
  const n = Number(count);
  const m = 50;
  const kb = (bytes: number) => (bytes / n / 1024).toFixed(1);
  const sides = { channeld: [] as number[], bare: [] as number[] };
  let last: Frame | undefined;
  for (let r = 0; r < Number(rounds); r++) {
    last = await channeld(n, m, unbundled, sampler);
    sides.channeld.push(total(last));
    sides.bare.push(total(await bare(n, m, sampler)));
    console.log(`round ${r + 1}: channeld ${kb(sides.channeld.at(-1)!)} ${what}, bare bot ${kb(sides.bare.at(-1)!)} KB`);
  }
  const [c, b] = [median(sides.channeld), median(sides.bare)];
  console.log(`medians: channeld ${kb(c)} ${what}, bare grammy bot ${kb(b)} KB, ratio ${(c / b).toFixed(2)}×`);
  console.log(`\nchanneld, last round, by the nearest frame of its own code (${what}):`);
  for (const [frame, bytes] of byOwnFrame(last!).slice(0, 25)) console.log(`${kb(bytes).padStart(7)}  ${frame}`);
}

await main();
