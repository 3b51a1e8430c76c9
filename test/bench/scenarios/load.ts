import { waitFor } from '../../helpers/daemon.js';
import type { DaemonProcess } from '../../helpers/process.js';
import { Fleet, rssMb } from '../fleet.js';
import { percentile, type Row, type ScenarioOptions } from '../report.js';

/** The message each conversation sends; the echo agent streams it back word by word. */
const TEXT = 'load test answer';

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
}

/**
 * Sends one message in each of `level` fresh Telegram chats at the same moment and measures,
 * for each, message → first visible update and message → final text, from the fake's own
 * timestamps of the calls. The fake's call log is read from a cursor, so a 10,000-conversation
 * level costs the harness one pass over its calls, not one per poll.
 */
async function measure(fleet: Fleet, daemon: DaemonProcess, level: number, firstChat: number, timeoutMs: number): Promise<Omit<Level, 'level'>> {
  const pid = daemon.child.pid!;
  let cursor = fleet.tg.calls.length;
  const errorsBefore = daemon.lines.filter((l) => Number(l.level) >= 50).length;
  const sentAt = new Map<number, number>();
  for (let i = 0; i < level; i++) {
    sentAt.set(firstChat + i, Date.now());
    fleet.tg.dm(TEXT, { id: firstChat + i, first_name: 'u' });
  }
  const first = new Map<number, number>();
  const final = new Map<number, number>();
  let peak = 0;
  let polls = 0;
  try {
    await waitFor(
      () => {
        if (polls++ % 20 === 0) peak = Math.max(peak, rssMb(pid));
        const calls = fleet.tg.calls;
        for (; cursor < calls.length; cursor++) {
          const c = calls[cursor]!;
          if (c.method !== 'sendMessage' && c.method !== 'editMessageText' && c.method !== 'sendMessageDraft') continue;
          const chat = Number((c.body as { chat_id?: unknown }).chat_id);
          const at = sentAt.get(chat);
          if (at === undefined) continue;
          if (!first.has(chat)) first.set(chat, c.at - at);
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
  const f = [...first.values()];
  const t = [...final.values()];
  return {
    firstP50: percentile(f, 50),
    firstP99: percentile(f, 99),
    p50: percentile(t, 50),
    p99: percentile(t, 99),
    missing: level - final.size,
    errors: daemon.lines.filter((l) => Number(l.level) >= 50).length - errorsBefore,
    rssMb: peak,
  };
}

/**
 * The load curve: at rising numbers of concurrent conversations, each sends one message and
 * the model (the echo agent, three words 1 s apart) takes 2 s to answer; streamed drafts on.
 * First visible update and turn latency (message → final text) p50/p99 against the model's own
 * 2 s, the daemon's peak RSS, missing answers and error lines. Targets: at 1,000, first visible
 * p99 ≤ 300 ms and turn p99 ≤ 1.1× the model's time; at 10,000, no error.
 */
export async function load(o: ScenarioOptions): Promise<Row[]> {
  // LOAD_LEVELS=100,1000 runs only those levels (a re-measure that has no time for 10,000).
  const chosen = process.env.LOAD_LEVELS?.split(',')
    .map(Number)
    .filter((l) => l > 0);
  const levels = o.smoke ? [1, 5] : chosen?.length ? chosen : [1, 10, 100, 1000, 3000, 10_000];
  const delayMs = o.smoke ? 20 : 1000;
  const modelMs = 2 * delayMs;
  const fleet = await new Fleet().start();
  const results: Level[] = [];
  let idleRss = 0;
  try {
    // In-flight limits above the largest level: the curve shows the daemon, not a configured cap.
    fleet.write({ echoDelayMs: delayMs, maxInFlight: 12_000, streamMode: 'partial' });
    const p = fleet.spawn();
    try {
      await waitFor(() => fleet.dc.connected && fleet.sl.socketOpen && fleet.tg.callsOf('getUpdates').length > 0, 120_000);
      idleRss = rssMb(p.child.pid!);
      let chat = 200_000;
      for (const level of levels) {
        // A single conversation is sampled several times, one after the other, for a steady floor.
        const rounds = level === 1 ? 5 : 1;
        const all: Array<Omit<Level, 'level'>> = [];
        for (let r = 0; r < rounds; r++) {
          all.push(await measure(fleet, p, level, chat, 120_000 + level * 30));
          chat += level;
        }
        const pick = (k: keyof Omit<Level, 'level'>) =>
          rounds === 1
            ? all[0]![k]
            : percentile(
                all.map((a) => a[k]),
                50,
              );
        results.push({
          level,
          firstP50: pick('firstP50'),
          firstP99: pick('firstP99'),
          p50: pick('p50'),
          p99: pick('p99'),
          missing: all.reduce((a, b) => a + b.missing, 0),
          errors: all.reduce((a, b) => a + b.errors, 0),
          rssMb: Math.max(...all.map((a) => a.rssMb)),
        });
      }
    } finally {
      p.signal('SIGTERM');
      await p.exited;
    }
  } finally {
    await fleet.close();
  }
  return loadRows(results, modelMs, idleRss, levels.at(-1)!);
}

/** The rows of the load curve, with the targets at 1,000 and at the top level. */
export function loadRows(results: Level[], modelMs: number, idleRss: number, top: number): Row[] {
  const at1000 = results.find((r) => r.level === 1000);
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
        ...(r === at1000 ? { target: '≤ 300', met: r.firstP99 <= 300 } : {}),
      },
      { scenario: 'load', metric: `${tag}, message → final, p50`, value: r.p50, unit: 'ms' },
      {
        scenario: 'load',
        metric: `${tag}, message → final, p99`,
        value: r.p99,
        unit: 'ms',
        ...(r === at1000 ? { target: `≤ ${Math.round(1.1 * modelMs)} (1.1× the model's ${modelMs} ms)`, met: r.p99 <= 1.1 * modelMs } : {}),
      },
      { scenario: 'load', metric: `${tag}, turn p99 / model time`, value: r.p99 / modelMs, unit: '×' },
      { scenario: 'load', metric: `${tag}, peak RSS`, value: r.rssMb, unit: 'MB' },
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
