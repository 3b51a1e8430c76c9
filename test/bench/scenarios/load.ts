import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { FakeTelegram } from '../../fakes/telegram/server.js';
import { waitFor } from '../../helpers/daemon.js';
import { cpuMs, Fleet, rssMb, TRIMMED_AFTER_MS } from '../fleet.js';
import { noSqlite, variant } from '../guarantee-cost.js';
import { percentile, type Row, type ScenarioOptions } from '../report.js';

/** The message each conversation sends; the echo agent streams it back word by word. */
const TEXT = 'load test answer';
/** Bursts each side answers before the levels (sixteenth round: one left channeld's code and heap still warming up). */
const WARM_BURSTS = 3;
/** The level the targets are set at. */
const TARGET_LEVEL = 1000;
/**
 * Bursts each side answers at the target level, interleaved, reported by their medians: one
 * burst's p99 moved by 30-70 % between runs of one build (184, 240 and 316 ms on one machine,
 * twenty-fourth round), so the target is judged on the median of three and each burst is shown.
 */
const TARGET_ROUNDS = 3;

/** One level: `level` conversations each send one message at once. */
export interface Level {
  level: number;
  /** Message → first visible update (the first message of the reply), p50 and p99. */
  firstP50: number;
  firstP99: number;
  /** Message → final text (the reply holding the whole answer), p50 and p99. */
  p50: number;
  p99: number;
  /** Conversations whose final text never came, and error lines the daemon logged meanwhile. */
  missing: number;
  errors: number;
  /** The daemon's peak RSS while the level ran. */
  rssMb: number;
  /** The bot's CPU time (all its threads, user and system) from the burst until the last final text, in ms. */
  cpuMs: number;
  /**
   * How busy the fake Bot API (this process's event loop) was from the burst until the last
   * first visible update: near 1, the fake and not the bot set the pace of the first updates.
   */
  fakeBusy: number;
  /** Each burst's p99s, in the order they ran, when the level ran several (the figures above are their medians). */
  bursts?: Array<{ firstP99: number; p99: number }>;
}

/** What `measure` reads: the fake the bot polls, the bot's process, and its error lines so far. */
export interface Target {
  tg: FakeTelegram;
  pid: number;
  errorLines: () => number;
}

/**
 * Sends one message in each of `level` fresh Telegram chats at the same moment and measures,
 * for each, message → first visible update and message → final text, from the fake's own
 * timestamps of the calls. The fake's call log is read from a cursor, so a 10,000-conversation
 * level costs the harness one pass over its calls, not one per poll.
 */
export async function measure(target: Target, level: number, firstChat: number, timeoutMs: number): Promise<Omit<Level, 'level'>> {
  const { tg, pid } = target;
  let cursor = tg.calls.length;
  const errorsBefore = target.errorLines();
  const elu0 = performance.eventLoopUtilization();
  const cpu0 = cpuMs(pid);
  let fakeBusy = Number.NaN;
  const sentAt = new Map<number, number>();
  for (let i = 0; i < level; i++) {
    sentAt.set(firstChat + i, Date.now());
    tg.dm(TEXT, { id: firstChat + i, first_name: 'u' });
  }
  const first = new Map<number, number>();
  const final = new Map<number, number>();
  let peak = 0;
  let polls = 0;
  try {
    await waitFor(
      () => {
        if (polls++ % 20 === 0) peak = Math.max(peak, rssMb(pid));
        const calls = tg.calls;
        for (; cursor < calls.length; cursor++) {
          const c = calls[cursor]!;
          if (c.method !== 'sendMessage' && c.method !== 'editMessageText' && c.method !== 'sendMessageDraft') continue;
          const chat = Number((c.body as { chat_id?: unknown }).chat_id);
          const at = sentAt.get(chat);
          if (at === undefined) continue;
          if (!first.has(chat)) {
            first.set(chat, c.at - at);
            if (first.size === level) fakeBusy = performance.eventLoopUtilization(elu0).utilization;
          }
          if (c.method !== 'sendMessageDraft' && String((c.body as { text?: unknown }).text).trim() === TEXT && !final.has(chat)) final.set(chat, c.at - at);
        }
        return final.size >= level;
      },
      timeoutMs,
      5,
    );
  } catch {
    // Reported as missing answers, not thrown: the level's other figures still count.
  }
  peak = Math.max(peak, rssMb(pid));
  const cpu = cpuMs(pid) - cpu0;
  // Some chat never showed a first update (it is counted as missing): the whole wait, then.
  if (Number.isNaN(fakeBusy)) fakeBusy = performance.eventLoopUtilization(elu0).utilization;
  const f = [...first.values()];
  const t = [...final.values()];
  return {
    firstP50: percentile(f, 50),
    firstP99: percentile(f, 99),
    p50: percentile(t, 50),
    p99: percentile(t, 99),
    missing: level - final.size,
    errors: target.errorLines() - errorsBefore,
    rssMb: peak,
    cpuMs: cpu,
    fakeBusy,
  };
}

/** One side of the curve, started once and measured at every level. */
export interface Side {
  name: string;
  target: Target;
  idleRss: number;
  close: () => Promise<void>;
}

/**
 * channeld on its own fakes, as the unit runs it (`script`: another build, for a before/after
 * run; `nodeArgs`: node flags added to the unit's). Its drafts are edits, as the floors' are,
 * unless `nativeDrafts` (Telegram's default in private chats: sendMessageDraft, then the final
 * text as a new message).
 */
export async function channeldSide(name: string, delayMs: number, o: { script?: string; nativeDrafts?: boolean; nodeArgs?: string[] } = {}): Promise<Side> {
  const { script, nativeDrafts, nodeArgs } = o;
  const fleet = await new Fleet().start();
  // In-flight limits above the largest level: the curve shows the daemon, not a configured cap.
  fleet.write({ echoDelayMs: delayMs, maxInFlight: 12_000, streamMode: 'partial', nativeDrafts });
  const p = fleet.spawn({ ...(script ? { script } : {}), ...(nodeArgs ? { nodeArgs } : {}) });
  const close = async () => {
    p.signal('SIGTERM');
    await p.exited;
    await fleet.close();
  };
  try {
    await waitFor(() => fleet.dc.connected && fleet.sl.socketOpen && fleet.tg.callsOf('getUpdates').length > 0, 120_000);
  } catch (e) {
    await close();
    throw e;
  }
  const errorLines = () => p.lines.filter((l) => Number(l.level) >= 50).length;
  return { name, target: { tg: fleet.tg, pid: p.child.pid!, errorLines }, idleRss: rssMb(p.child.pid!), close };
}

/** The floors' names, as the rows show them, and the bot each one runs. */
const floors: Record<'floor' | 'floor-http' | 'floor-paced', { label: string; script: string; env?: Record<string, string> }> = {
  floor: { label: 'floor (bare grammy, every update at once)', script: 'grammy-load.mjs' },
  'floor-http': { label: 'floor without an SDK (undici, every update at once)', script: 'http-load.mjs' },
  'floor-paced': {
    label: 'floor without an SDK, paced as channeld (LOAD_PACED: every word as it comes, each edit 1 s after the last answer)',
    script: 'http-load.mjs',
    env: { PACED: '1' },
  },
};

/**
 * A floor: a minimal bot handling every update at once, on its own fake Bot API; `floor` is a
 * grammy bot, `floor-http` the same bot with no SDK (straight undici calls), `floor-paced` that
 * bot streaming each answer as channeld does with edits (every word as it comes, each edit
 * paced 1 s from the previous answer), where the floors above send one edit, unpaced.
 */
async function floorSide(name: keyof typeof floors, modelMs: number): Promise<Side> {
  const tg = new FakeTelegram();
  await tg.start();
  const child = spawn(process.execPath, [join(import.meta.dirname, '../bare', floors[name].script)], {
    env: { PATH: process.env.PATH, TG: tg.token, API_ROOT: tg.url, MODEL_MS: String(modelMs), ...floors[name].env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise((r) => child.once('exit', r));
  let errors = 0;
  child.stderr!.on('data', (d: Buffer) => (errors += String(d).split('\n').filter(Boolean).length));
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    void exited.then(() => reject(new Error(`the ${name} bot exited before it was ready`)));
  });
  const close = async () => {
    child.kill('SIGTERM');
    await exited;
    await tg.close();
  };
  return { name, target: { tg, pid: child.pid!, errorLines: () => errors }, idleRss: rssMb(child.pid!), close };
}

/**
 * The load curve: at rising numbers of concurrent conversations, each sends one message and
 * the model (the echo agent, three words 1 s apart) takes 2 s to answer; streamed drafts on.
 * First visible update and turn latency (message → final text) p50/p99 against the model's own
 * 2 s, the daemon's peak RSS, missing answers and error lines. Targets: at 1,000, first visible
 * p99 ≤ 300 ms and turn p99 ≤ 1.1× the model's time, on the medians of TARGET_ROUNDS bursts; at
 * 10,000, no error.
 *
 * Side by side at each level, one after the other on the same kind of fake: the floor, a
 * minimal grammy bot that handles every update at once and answers with the same first word
 * and final text (what Node and the SDK alone cost on this machine); the floor without an SDK,
 * the same bot on straight undici calls (what Node alone costs: a target it misses cannot be
 * met by any Node daemon on this machine and this fake); and with LOAD_BEFORE=script a second
 * build of channeld (e.g. a copy of dist/ before a change); with LOAD_NO_SQLITE=1 the bench-only
 * build of guarantee-cost.ts whose per-message writes never reach SQLite (no durable inbox, no
 * reply refs, no sessions: what the guarantees cost at this load); with LOAD_DRAFTS=1 channeld once more
 * with Telegram's native drafts, its default in private chats (the final text a new message,
 * sent at once, instead of an edit paced 1 s after the previous one); with LOAD_PACED=1 the
 * floor without an SDK streaming as channeld does with edits (each word as it comes, each edit
 * 1 s after the previous answer), where the other floors send one unpaced edit after 2 s: what
 * the turn target costs any bot that keeps Telegram's pace. Each level also reports how busy
 * the fake Bot API, which runs in this process, was until the last first update went out.
 * Every side answers WARM_BURSTS bursts of min(1,000, top level) conversations before the
 * levels: the first two are reported as the cold and the second figures, and the levels
 * measure a warmed-up process.
 */
export async function load(o: ScenarioOptions): Promise<Row[]> {
  // LOAD_LEVELS=100,1000 runs only those levels (a re-measure that has no time for 10,000).
  const chosen = process.env.LOAD_LEVELS?.split(',')
    .map(Number)
    .filter((l) => l > 0);
  const levels = o.smoke ? [1, 5] : chosen?.length ? chosen : [1, 10, 100, 1000, 3000, 10_000];
  const delayMs = o.smoke ? 20 : 1000;
  const modelMs = 2 * delayMs;
  const before = process.env.LOAD_BEFORE;
  // Built from this tree's dist/ when asked: guarantee-cost.ts's patches, each matched exactly once.
  const noSqliteScript = process.env.LOAD_NO_SQLITE === '1' ? variant('no-sqlite', noSqlite) : undefined;
  // LOAD_DRAFTS=1 adds channeld with Telegram's native drafts on (its default in private
  // chats); the smoke run always has it, so that side cannot rot.
  const drafts = process.env.LOAD_DRAFTS === '1' || o.smoke === true;
  // LOAD_PACED=1 adds the floor without an SDK paced as channeld: whether a target missed with
  // edits is out of reach of any Node bot that keeps Telegram's pace. The smoke run has it too.
  const paced = process.env.LOAD_PACED === '1' || o.smoke === true;
  const warm = o.smoke ? 0 : Math.min(1000, Math.max(...levels));
  const sides: Side[] = [];
  const results = new Map<string, Level[]>();
  /** Each side's first two bursts of `warm` conversations after start-up: cold, then second. */
  const early = new Map<string, Array<Omit<Level, 'level'>>>();
  /** Each side's burst of `warm` conversations after the levels and a lull long enough for the memory trim. */
  const afterLull = new Map<string, Omit<Level, 'level'>>();
  try {
    sides.push(await channeldSide('channeld', delayMs));
    if (before) sides.push(await channeldSide('before', delayMs, { script: before }));
    if (noSqliteScript) sides.push(await channeldSide('no-sqlite', delayMs, { script: noSqliteScript }));
    if (drafts) sides.push(await channeldSide('drafts', delayMs, { nativeDrafts: true }));
    sides.push(await floorSide('floor', modelMs), await floorSide('floor-http', modelMs));
    if (paced) sides.push(await floorSide('floor-paced', modelMs));
    let chat = 200_000;
    // One answer each before the first level, not counted: a level that comes first (no level 1)
    // would otherwise pay for what a bot learns once (the server refusing rich messages). Then
    // three bursts of up to 1,000 conversations, left out of the curve, the first two reported
    // apart (cold, second): the first bursts after start-up run code V8 has not optimized yet
    // and a heap still growing to what a burst needs, which a long-running daemon pays once,
    // not at every burst (channeld until its last first update of 1,000: main thread 300-360
    // ms and V8's compiler and collector threads 300-450 ms in the first burst, 190-380 and
    // 150-380 ms in the next ones; first visible p99 670, 370, 336 and 248 ms in its first four
    // bursts in one run, sixteenth round). The sides take turns, as at the levels, so each
    // side's lulls between bursts are as long here as there.
    for (const side of sides) await measure(side.target, 1, chat++, 30_000);
    for (let b = 0; warm > 1 && b < WARM_BURSTS; b++) {
      for (const side of sides) {
        const burst = await measure(side.target, warm, chat, 120_000 + warm * 30);
        chat += warm;
        if (b < 2) early.set(side.name, [...(early.get(side.name) ?? []), burst]);
      }
    }
    for (const [li, level] of levels.entries()) {
      // A single conversation is sampled several times for a steady floor, and the target
      // level three times (TARGET_ROUNDS), the sides taking turns at each round, so no side
      // waits for all of another's rounds (its memory trim would run meanwhile, sixteenth round).
      const rounds = level === 1 ? 5 : level === TARGET_LEVEL ? TARGET_ROUNDS : 1;
      const all = new Map<string, Array<Omit<Level, 'level'>>>();
      for (let r = 0; r < rounds; r++) {
        // The sides take turns going first (LOAD_ROTATE shifts the start between runs), so a
        // machine getting busier or quieter during a level does not always favour one side.
        const rot = (li + r + Number(process.env.LOAD_ROTATE ?? 0)) % sides.length;
        const order = [...sides.slice(rot), ...sides.slice(0, rot)];
        for (const side of order) {
          all.set(side.name, [...(all.get(side.name) ?? []), await measure(side.target, level, chat, 120_000 + level * 30)]);
          chat += level;
        }
      }
      for (const side of sides) {
        const got = results.get(side.name) ?? [];
        got.push({ level, ...summarize(all.get(side.name)!) });
        results.set(side.name, got);
      }
    }
    // Up to 1,000 conversations the levels follow each other with lulls of seconds; a daemon
    // left alone for longer gives back the memory its bursts took (src/observe/memory-trim.ts)
    // and its next burst takes it again. One more burst each after such a lull shows what
    // that costs (the floors have no trim: theirs shows what the lull alone does).
    if (warm > 1) {
      await new Promise((r) => setTimeout(r, TRIMMED_AFTER_MS));
      for (const side of sides) {
        afterLull.set(side.name, await measure(side.target, warm, chat, 120_000 + warm * 30));
        chat += warm;
      }
    }
  } finally {
    for (const side of sides) await side.close();
  }
  const idle = (name: string) => sides.find((s) => s.name === name)?.idleRss ?? 0;
  const rows = loadRows(results.get('channeld')!, modelMs, idle('channeld'), levels.at(-1)!);
  for (const [name, bursts] of early) rows.push(...bursts.flatMap((c, i) => earlyRows(name, warm, i, c)));
  for (const [name, c] of afterLull)
    rows.push(...burstRows(name, `${warm} conversations after ${TRIMMED_AFTER_MS / 1000} s without a message${name in floors ? '' : ' (memory trimmed)'}`, c));
  for (const name of ['before', 'no-sqlite', 'drafts']) if (results.has(name)) rows.push(...sideRows(name, results.get(name)!));
  for (const name of Object.keys(floors) as Array<keyof typeof floors>) {
    if (!results.has(name)) continue;
    rows.push(...sideRows(name, results.get(name)!), ...ratioRows(name, results.get('channeld')!, results.get(name)!));
  }
  return rows;
}

/** How the rows name a side: a floor by what it runs, another build as LOAD_BEFORE's. */
function labelOf(name: string): string {
  if (name in floors) return floors[name as keyof typeof floors].label;
  if (name === 'drafts') return 'channeld with native drafts (LOAD_DRAFTS)';
  if (name === 'no-sqlite') return 'channeld with no durable write (LOAD_NO_SQLITE, a bench-only build)';
  return name === 'channeld' ? name : `${name} (LOAD_BEFORE build)`;
}

/** Another side's first visible and turn p50/p99 at each level, under its own name. */
function sideRows(name: string, results: Level[]): Row[] {
  const label = labelOf(name);
  return results.flatMap((r) => [
    { scenario: 'load', metric: `${label}, ${r.level} conversations, first visible p50`, value: r.firstP50, unit: 'ms' },
    { scenario: 'load', metric: `${label}, ${r.level} conversations, first visible p99`, value: r.firstP99, unit: 'ms' },
    { scenario: 'load', metric: `${label}, ${r.level} conversations, final p50`, value: r.p50, unit: 'ms' },
    { scenario: 'load', metric: `${label}, ${r.level} conversations, final p99`, value: r.p99, unit: 'ms' },
    { scenario: 'load', metric: `${label}, ${r.level} conversations, missing + error lines`, value: r.missing + r.errors, unit: '' },
    { scenario: 'load', metric: `${label}, ${r.level} conversations, fake Bot API busy until the first updates`, value: r.fakeBusy, unit: '' },
    { scenario: 'load', metric: `${label}, ${r.level} conversations, CPU per conversation`, value: r.cpuMs / r.level, unit: 'ms' },
  ]);
}

/** One side's figures at a level: a single burst as it came, several by their medians. */
export function summarize(all: Array<Omit<Level, 'level'>>): Omit<Level, 'level'> {
  const pick = (k: 'firstP50' | 'firstP99' | 'p50' | 'p99' | 'cpuMs' | 'fakeBusy') =>
    all.length === 1
      ? all[0]![k]
      : percentile(
          all.map((a) => a[k]),
          50,
        );
  return {
    firstP50: pick('firstP50'),
    firstP99: pick('firstP99'),
    p50: pick('p50'),
    p99: pick('p99'),
    cpuMs: pick('cpuMs'),
    missing: all.reduce((a, b) => a + b.missing, 0),
    errors: all.reduce((a, b) => a + b.errors, 0),
    rssMb: Math.max(...all.map((a) => a.rssMb)),
    fakeBusy: pick('fakeBusy'),
    ...(all.length > 1 ? { bursts: all.map((a) => ({ firstP99: a.firstP99, p99: a.p99 })) } : {}),
  };
}

/** A side's first or second burst after start-up (V8 not warmed up yet), kept out of the curve. */
function earlyRows(name: string, level: number, index: number, c: Omit<Level, 'level'>): Row[] {
  return burstRows(name, `the ${index === 0 ? 'first' : 'second'} ${level} conversations after start-up${index === 0 ? ' (cold)' : ''}`, c);
}

/** A burst outside the curve: its first visible and final p99, and what went missing. */
function burstRows(name: string, what: string, c: Omit<Level, 'level'>): Row[] {
  const label = `${labelOf(name)}, ${what}`;
  return [
    { scenario: 'load', metric: `${label}, first visible p99`, value: c.firstP99, unit: 'ms' },
    { scenario: 'load', metric: `${label}, final p99`, value: c.p99, unit: 'ms' },
    { scenario: 'load', metric: `${label}, missing + error lines`, value: c.missing + c.errors, unit: '' },
  ];
}

/** channeld's first visible and turn p99 over a floor's, at each level: the part channeld adds. */
function ratioRows(name: string, channeld: Level[], floor: Level[]): Row[] {
  return channeld.flatMap((c, i) => {
    const f = floor[i]!;
    return [
      { scenario: 'load', metric: `${c.level} conversations, first visible p99 channeld / ${name}`, value: c.firstP99 / f.firstP99, unit: '×' },
      { scenario: 'load', metric: `${c.level} conversations, final p99 channeld / ${name}`, value: c.p99 / f.p99, unit: '×' },
    ];
  });
}

/** How a target row says its figure is a median: ", median of 3 bursts" (nothing for one burst). */
function ofBursts(r: Level): string {
  return r.bursts ? `, median of ${r.bursts.length} bursts` : '';
}

/** The rows of the load curve, with the targets at 1,000 (medians of its bursts) and at the top level. */
export function loadRows(results: Level[], modelMs: number, idleRss: number, top: number): Row[] {
  const at1000 = results.find((r) => r.level === TARGET_LEVEL);
  const atTop = results.find((r) => r.level === top);
  const rows: Row[] = [{ scenario: 'load', metric: 'RSS idle, before the first level', value: idleRss, unit: 'MB' }];
  for (const r of results) {
    const tag = `${r.level} concurrent conversations`;
    rows.push(
      { scenario: 'load', metric: `${tag}, message → first visible, p50`, value: r.firstP50, unit: 'ms' },
      {
        scenario: 'load',
        metric: `${tag}, message → first visible, p99`,
        value: r.firstP99,
        unit: 'ms',
        ...(r === at1000 ? { target: `≤ 300${ofBursts(r)}`, met: r.firstP99 <= 300 } : {}),
      },
      { scenario: 'load', metric: `${tag}, message → final, p50`, value: r.p50, unit: 'ms' },
      {
        scenario: 'load',
        metric: `${tag}, message → final, p99`,
        value: r.p99,
        unit: 'ms',
        ...(r === at1000 ? { target: `≤ ${Math.round(1.1 * modelMs)} (1.1× the model's ${modelMs} ms)${ofBursts(r)}`, met: r.p99 <= 1.1 * modelMs } : {}),
      },
      // Each burst behind a target's median, so a median that meets it shows what it leaves out
      // (the five samples of a single conversation are not printed one by one).
      ...(r === at1000 ? (r.bursts ?? []) : []).flatMap((b, i): Row[] => [
        { scenario: 'load', metric: `${tag}, burst ${i + 1} of ${r.bursts!.length}: first visible p99`, value: b.firstP99, unit: 'ms' },
        { scenario: 'load', metric: `${tag}, burst ${i + 1} of ${r.bursts!.length}: final p99`, value: b.p99, unit: 'ms' },
      ]),
      { scenario: 'load', metric: `${tag}, turn p99 / model time`, value: r.p99 / modelMs, unit: '×' },
      { scenario: 'load', metric: `${tag}, peak RSS`, value: r.rssMb, unit: 'MB' },
      { scenario: 'load', metric: `${tag}, fake Bot API busy until the first updates`, value: r.fakeBusy, unit: '' },
      { scenario: 'load', metric: `${tag}, CPU per conversation (the daemon, until the last final text)`, value: r.cpuMs / r.level, unit: 'ms' },
      {
        scenario: 'load',
        metric: `${tag}, answers missing + error lines`,
        value: r.missing + r.errors,
        unit: '',
        ...(r === atTop ? { target: '0', met: r.missing + r.errors === 0 } : {}),
      },
    );
  }
  const floor = results[0]!.p99;
  const doubled = results.find((r) => r.p99 >= 2 * floor);
  rows.push({
    scenario: 'load',
    metric: doubled ? 'first level where turn p99 doubles' : `turn p99 never doubled up to ${top} conversations`,
    value: doubled?.level ?? top,
    unit: 'conversations',
  });
  return rows;
}
