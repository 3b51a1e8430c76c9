import { existsSync, rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { describe, expect, it } from 'vitest';
import { scaled } from '../helpers/timing.js';
import { scenarios } from './scenarios/index.js';

// One tiny iteration of each scenario, so the harness cannot rot. Figures are not asserted:
// speed belongs to `npm run bench`, not to tests.
describe('bench harness smoke', () => {
  for (const [name, run] of Object.entries(scenarios)) {
    it(
      `${name} runs and reports figures`,
      async () => {
        const rows = await run({ smoke: true });
        expect(rows.length).toBeGreaterThan(0);
        for (const r of rows) expect(Number.isFinite(r.value)).toBe(true);
      },
      name.startsWith('cluster') ? scaled(300_000) : scaled(120_000),
    ); // the cluster scenario starts real processes on NATS and PostgreSQL
  }
});

describe('load curve: the target level by its bursts', () => {
  it('judges 1,000 conversations on the medians of its bursts and prints each burst', async () => {
    const { loadRows, summarize } = await import('./scenarios/load.js');
    const burst = (firstP99: number, p99: number) => ({
      firstP50: firstP99 / 2,
      firstP99,
      p50: p99 - 50,
      p99,
      missing: 0,
      errors: 0,
      rssMb: 200,
      cpuMs: 600,
      fakeBusy: 0.3,
    });
    // One bad burst of three: the median meets both targets, the bad burst is still shown.
    const level = { level: 1000, ...summarize([burst(250, 2190), burst(420, 2600), burst(240, 2150)]) };
    const rows = loadRows([level], 2000, 150, 1000);
    const target = (m: string) => rows.find((r) => r.metric === `1000 concurrent conversations, message → ${m}, p99`)!;
    expect(target('first visible')).toMatchObject({ value: 250, met: true, target: '≤ 300, median of 3 bursts' });
    expect(target('final')).toMatchObject({ value: 2190, met: true });
    expect(rows.find((r) => r.metric === '1000 concurrent conversations, burst 2 of 3: first visible p99')?.value).toBe(420);
    expect(rows.find((r) => r.metric === '1000 concurrent conversations, burst 2 of 3: final p99')?.value).toBe(2600);
    // One burst: its figure as it came, no median said.
    const one = loadRows([{ level: 1000, ...summarize([burst(320, 2300)]) }], 2000, 150, 1000);
    expect(one.find((r) => r.metric === '1000 concurrent conversations, message → first visible, p99')).toMatchObject({
      value: 320,
      met: false,
      target: '≤ 300',
    });
    expect(one.some((r) => r.metric.includes('burst 1 of'))).toBe(false);
  });
});

describe('guarantee-cost variants', () => {
  // A refactor that moves the patched code makes the bench throw instead of measuring an
  // unpatched build; this says so at once rather than when someone next runs the bench.
  it('each bench-only patch applies exactly once to the built bundle', async () => {
    const { noSqlite, noTurnLine, variant } = await import('./guarantee-cost.js');
    for (const [name, patches] of [
      ['smoke-no-sqlite', noSqlite],
      ['smoke-no-turn-line', noTurnLine],
    ] as const) {
      const script = variant(name, patches);
      try {
        expect(existsSync(script)).toBe(true);
      } finally {
        rmSync(dirname(dirname(script)), { recursive: true, force: true });
      }
    }
  });
});

describe('soak harness smoke', () => {
  it(
    'runs briefly with faults (a full disk, a foreign lock, an endless-pagination MCP server, a 1 byte/s attachment among them) and a kill -9, and accounts for every message',
    async () => {
      const { soak } = await import('./soak.js');
      const r = await soak(8, () => {}, 15_000);
      expect(r.sent).toBeGreaterThan(20);
      expect(r.restarts).toBe(1);
      // No platform message is lost across faults and a kill -9: each has its answer, read from
      // the fake platform's stored messages (on Telegram in the sender's own chat). Web chat
      // answers are left out: one finished by the restarted daemon before the tab reconnects
      // has no tab to go to (the tab backlog lives in memory), so the soak cannot see it.
      expect(r.lostTexts.filter((t) => !t.endsWith('-web'))).toEqual([]);
      expect(r.answered).toBeGreaterThan(0);
      // Nothing the platforms show answers a message that was not sent there: no reply in the
      // wrong chat, no draft left behind, no error text.
      expect(r.strays).toEqual([]);
      // A kill between a platform accepting a reply and the commit of its id is a window no bot
      // can close on Telegram and Slack (see docs/PERFORMANCE.md): such a duplicate is told apart from the
      // inbox the killed process left. The kill here often lands in it: the storage episodes end
      // just before it, and the messages they held back are answered all at once. Any other
      // duplicate, during a storage fault or after the restart (dropped sockets, redelivered
      // updates and envelopes, reconnects), is a bug.
      expect(r.duplicatedUnexplained).toEqual([]);
      expect(r.sentAfterRestart).toBeGreaterThanOrEqual(8);
      expect(r.duplicatedAfterRestart).toEqual([]);
      // An endless-pagination tool server is given up on (not retried forever), and a 1 byte/s
      // attachment ends in its timeout: the turn is answered (counted above) with the file not read.
      expect(r.mcpEndless).toBe('failed');
      expect(r.faults['1 byte/s attachment']).toBe(1);
      expect(r.attachmentNotRead).toBe(true);
    },
    scaled(180_000),
  );

  it('a duplicate is put down to the kill -9 only when the killed process never stored one of its two answers', async () => {
    const { killExplains } = await import('./soak.js');
    const m = { text: 'soak-21-tg', channel: 'tg' };
    const inbox = (state: string, refs: string[], rows = 1) => new Map([['tg:soak-21-tg', { state, refs, rows }]]);
    // Sent by the killed process, which died before storing the id; the restarted turn sent 108.
    expect(killExplains(m, ['107', '108'], inbox('pending', []), inbox('done', ['108']))).toBe(true);
    expect(killExplains(m, ['107', '108'], inbox('running', []), inbox('done', ['108']))).toBe(true);
    // The id was stored, yet the re-run sent a new message instead of editing it.
    expect(killExplains(m, ['107', '108'], inbox('running', ['107']), inbox('done', ['108']))).toBe(false);
    // Finished before the kill: nothing re-ran it, so the kill explains nothing.
    expect(killExplains(m, ['107', '108'], inbox('done', ['107']), inbox('done', ['107']))).toBe(false);
    // Not stored at the kill at all (it came in after the restart).
    expect(killExplains(m, ['107', '108'], new Map(), inbox('done', ['108']))).toBe(false);
    // Neither answer is known to the inbox: one process sent twice.
    expect(killExplains(m, ['107', '108'], inbox('pending', []), inbox('done', ['109']))).toBe(false);
    // Stored twice (a second delivery not recognised), each copy answered once.
    expect(killExplains(m, ['107', '108'], inbox('pending', []), inbox('done', ['108'], 2))).toBe(false);
    // Three answers: one kill makes at most one orphan.
    expect(killExplains(m, ['107', '108', '109'], inbox('pending', []), inbox('done', ['109']))).toBe(false);
  });
});

describe('profile breakdown', () => {
  it('attributes each sample to the first kind of work on its stack, leaf up', async () => {
    const { breakdown } = await import('./profile.js');
    const frame = (id: number, url: string, children: number[] = [], functionName = 'f') => ({ id, callFrame: { functionName, url, lineNumber: 0 }, children });
    const rows = breakdown({
      nodes: [
        frame(1, '', [2, 4], '(root)'),
        frame(2, 'file:///x/dist/src/dispatch/dispatcher.js', [3]),
        frame(3, 'file:///x/node_modules/better-sqlite3/lib/methods/transaction.js'),
        frame(4, '', [], '(garbage collector)'),
      ],
      startTime: 0,
      samples: [3, 3, 2, 4],
      timeDeltas: [10, 10, 10, 10],
    });
    expect(rows).toEqual([
      { kind: 'SQLite: durable inbox and sessions', share: 0.5 },
      { kind: 'dispatch (access, lanes, queue modes)', share: 0.25 },
      { kind: 'garbage collection', share: 0.25 },
    ]);
  });

  it('counts only the samples inside the timed window', async () => {
    const { breakdown } = await import('./profile.js');
    const frame = (id: number, url: string, children: number[] = [], functionName = 'f') => ({ id, callFrame: { functionName, url, lineNumber: 0 }, children });
    const profile = {
      nodes: [frame(1, '', [2, 3], '(root)'), frame(2, 'file:///x/dist/src/dispatch/lanes.js'), frame(3, 'file:///x/node_modules/pino/pino.js')],
      startTime: 1000,
      // Samples at 1010 (dispatch), 1020 (pino), 1030 (pino): the window [1015, 1040] holds the last two.
      samples: [2, 3, 3],
      timeDeltas: [10, 10, 10],
    };
    expect(breakdown(profile, 1015, 1040)).toEqual([{ kind: 'logging', share: 1 }]);
    expect(breakdown(profile)).toHaveLength(2);
  });
});

describe('heap per running turn', () => {
  // The snapshot signal was SIGUSR2, which is also channeld's upgrade signal: every snapshot
  // started an upgrade of the daemon being measured.
  it(
    'measures what each running turn keeps, with the daemon taking snapshots and nothing else',
    async () => {
      const { main } = await import('./heap.js');
      const lines: string[] = [];
      const kept = await main(['--turns', '20'], (line) => void lines.push(line));
      expect(lines.some((l) => l.includes('kept per running turn'))).toBe(true);
      expect(kept).toBeGreaterThan(0);
    },
    scaled(120_000),
  );
});

describe('heap snapshot summary', () => {
  it('sums self sizes by constructor for objects and by kind for the rest', async () => {
    const { summarize } = await import('./heap.js');
    const snapshot = {
      snapshot: {
        meta: {
          node_fields: ['type', 'name', 'id', 'self_size', 'edge_count'],
          node_types: [['hidden', 'array', 'string', 'object', 'code', 'closure', 'regexp', 'number', 'native']] as [string[]],
        },
      },
      // Two Maps (object), one string, one closure named "f".
      nodes: [3, 0, 1, 100, 0, 3, 0, 2, 50, 0, 2, 1, 3, 30, 0, 5, 2, 4, 20, 0],
      strings: ['Map', 'some text', 'f'],
    };
    expect(Object.fromEntries(summarize(snapshot))).toEqual({
      'object:Map': { bytes: 150, count: 2 },
      string: { bytes: 30, count: 1 },
      'closure:f': { bytes: 20, count: 1 },
    });
  });
});

describe('burst timeline', () => {
  it('splits first messages into batches in the order the chats wrote, and leaves out a batch a chat is missing from', async () => {
    const { firstSendSpans } = await import('./burst-timeline.js');
    const send = (chat: number, at: number) => ({ method: 'sendMessage', body: { chat_id: chat }, at });
    const calls = [
      send(10, 1005),
      { method: 'getUpdates', body: {}, at: 1006 },
      send(11, 1020),
      send(10, 1030), // an edit's successor, not the first message
      send(12, 1040),
      send(99, 1001), // another burst's chat
    ];
    expect(firstSendSpans(calls, 10, 3, 1000, 2)).toEqual([
      [5, 20],
      [40, 40],
    ]);
    expect(firstSendSpans(calls, 10, 4, 1000, 2)).toEqual([[5, 20], undefined]);
  });

  it('reads the collector pauses the daemon wrote and sums those inside the window by kind', async () => {
    const { parseGcLog, pausesIn } = await import('./burst-timeline.js');
    // The last line is still being written: "1" of what will be "12.50" must not count.
    const pauses = parseGcLog('100.5 scavenge 2.00\n150 mark-compact 9.50\n160 scavenge 3.25\n300 scavenge 1.00\n310 mark-compact 1');
    expect(pauses).toHaveLength(4);
    expect(Object.fromEntries(pausesIn(pauses, 100, 300))).toEqual({ scavenge: { count: 2, ms: 5.25 }, 'mark-compact': { count: 1, ms: 9.5 } });
  });

  it('records the pauses of a process it is imported into', async () => {
    const { spawnSync } = await import('node:child_process');
    const { readFileSync, rmSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { pathToFileURL } = await import('node:url');
    const { parseGcLog } = await import('./burst-timeline.js');
    const observer = pathToFileURL(join(import.meta.dirname, 'gc-pauses.mjs')).href;
    // Two full collections, then one more tick so the observer's batch is delivered.
    const child = spawnSync(process.execPath, ['--expose-gc', `--import=${observer}`, '-e', 'gc(); gc(); setTimeout(() => console.log(process.pid), 50)'], {
      encoding: 'utf8',
    });
    expect(child.status).toBe(0);
    const file = join(tmpdir(), `channeld-gc-${child.stdout.trim()}.log`);
    try {
      expect(parseGcLog(readFileSync(file, 'utf8')).filter((p) => p.kind === 'mark-compact').length).toBeGreaterThanOrEqual(2);
    } finally {
      rmSync(file, { force: true });
    }
  });
});
