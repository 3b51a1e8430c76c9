import { readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Call } from '../fakes/telegram/server.js';
import { median } from './report.js';
import { channeldSide, measure } from './scenarios/load.js';

/**
 * `npx tsx test/bench/burst-timeline.ts [BURSTS] [N]` (after `npm run build`): where one burst's
 * first-message window goes, for the load curve's burst of N (default 1,000) fresh
 * conversations, as the unit runs the daemon. For each of BURSTS (default 5) warm bursts it
 * prints, in ms after the burst was sent:
 *
 * - when each `getUpdates` reached the fake (a batch of up to 100 updates is acknowledged by
 *   the next one, so this is the durable inbox and the admission of each batch);
 * - for each batch of 100 conversations, when its first and last first message reached it;
 * - V8's collector pauses on the main thread until the last first message (count and ms by
 *   kind), read from the daemon through test/bench/gc-pauses.mjs (`--import`): a lower bound
 *   of the collector's share, since what its helper threads do and the steps of incremental
 *   marking after the first are not reported as pauses.
 *
 * One uncounted burst warms the daemon up; each burst starts 1.5 s after the last final text,
 * as in burst-ab.ts. The fake's timestamps and the pauses are on the same clock (ms since the
 * epoch on this machine).
 */

/** A pause of V8's collector as gc-pauses.mjs writes it. */
export interface GcPause {
  atMs: number;
  kind: string;
  ms: number;
}

/** Parses gc-pauses.mjs's lines ("<start ms> <kind> <duration ms>"); a last line without its newline (read mid-append) is left out. */
export function parseGcLog(text: string): GcPause[] {
  const out: GcPause[] = [];
  const lines = text.split('\n');
  // The text after the last newline is a line still being written (or nothing).
  lines.pop();
  for (const line of lines) {
    const [at, kind, ms] = line.split(' ');
    if (kind === undefined || ms === undefined || !Number.isFinite(Number(at)) || !Number.isFinite(Number(ms))) continue;
    out.push({ atMs: Number(at), kind, ms: Number(ms) });
  }
  return out;
}

/** The pauses that started in [fromMs, toMs), by kind: how many and their total ms. */
export function pausesIn(pauses: readonly GcPause[], fromMs: number, toMs: number): Map<string, { count: number; ms: number }> {
  const out = new Map<string, { count: number; ms: number }>();
  for (const p of pauses) {
    if (p.atMs < fromMs || p.atMs >= toMs) continue;
    const k = out.get(p.kind) ?? { count: 0, ms: 0 };
    k.count++;
    k.ms += p.ms;
    out.set(p.kind, k);
  }
  return out;
}

/**
 * For the chats firstChat … firstChat + n - 1, taken in batches of `batchSize` in that order
 * (the order their messages were sent, so the order the fake hands them out), when the first
 * and the last first `sendMessage` of each batch reached the fake, in ms after t0. A batch
 * with a chat that got no message has no span (undefined).
 */
export function firstSendSpans(calls: readonly Call[], firstChat: number, n: number, t0: number, batchSize = 100): Array<[number, number] | undefined> {
  const first = new Map<number, number>();
  for (const c of calls) {
    if (c.method !== 'sendMessage') continue;
    const chat = Number(c.body.chat_id);
    if (chat >= firstChat && chat < firstChat + n && !first.has(chat)) first.set(chat, c.at - t0);
  }
  const spans: Array<[number, number] | undefined> = [];
  for (let from = 0; from < n; from += batchSize) {
    const times: number[] = [];
    for (let chat = firstChat + from; chat < firstChat + Math.min(n, from + batchSize); chat++) {
      const at = first.get(chat);
      if (at !== undefined) times.push(at);
    }
    spans.push(times.length === Math.min(batchSize, n - from) ? [Math.min(...times), Math.max(...times)] : undefined);
  }
  return spans;
}

const fmt = (kinds: Map<string, { count: number; ms: number }>): string =>
  [...kinds].map(([kind, k]) => `${kind} ${k.count} (${k.ms.toFixed(1)} ms)`).join(', ') || 'none';

async function main(): Promise<void> {
  const [bursts = '5', count = '1000'] = process.argv.slice(2);
  const n = Number(count);
  const observer = pathToFileURL(join(import.meta.dirname, 'gc-pauses.mjs')).href;
  const side = await channeldSide('channeld', 1000, { nodeArgs: [`--import=${observer}`] });
  const gcFile = join(tmpdir(), `channeld-gc-${side.target.pid}.log`);
  const tg = side.target.tg;
  const windows: number[] = [];
  const pausedMs: number[] = [];
  try {
    let chat = 100_000;
    for (let r = -1; r < Number(bursts); r++) {
      const c0 = tg.calls.length;
      const t0 = Date.now();
      const m = await measure(side.target, n, chat, 120_000);
      const calls = tg.calls.slice(c0);
      const spans = firstSendSpans(calls, chat, n, t0);
      chat += n;
      if (r >= 0 && (m.missing > 0 || spans.includes(undefined))) {
        console.log(`burst ${r + 1}: incomplete (${m.missing} answers missing), left out`);
      } else if (r >= 0) {
        const lastFirst = Math.max(...spans.map((s) => s![1]));
        const polls = calls.filter((c) => c.method === 'getUpdates').map((c) => c.at - t0);
        const kinds = pausesIn(parseGcLog(readFileSync(gcFile, 'utf8')), t0, t0 + lastFirst);
        windows.push(lastFirst);
        pausedMs.push([...kinds.values()].reduce((s, k) => s + k.ms, 0));
        console.log(`burst ${r + 1}: first visible p99 ${m.firstP99} ms, turn p99 ${m.p99} ms, last first message at ${lastFirst} ms`);
        console.log(`  getUpdates reached the fake at: ${polls.filter((t) => t <= lastFirst).join(' ')}`);
        console.log(`  first messages, per batch of 100: ${spans.map((s) => (s ? `${s[0]}-${s[1]}` : 'missing')).join(' ')}`);
        console.log(`  collector pauses until then: ${fmt(kinds)}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 1500));
    }
  } finally {
    await side.close();
    rmSync(gcFile, { force: true });
  }
  console.log(
    `medians: last first message at ${median(windows)} ms, collector pauses until then ${median(pausedMs).toFixed(1)} ms ` +
      `(${((100 * median(pausedMs)) / median(windows)).toFixed(0)} % of the window)`,
  );
}

if (process.argv[1]?.endsWith('burst-timeline.ts')) await main();
