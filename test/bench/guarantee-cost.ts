import { cpSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { median } from './report.js';
import { bareRun, channeldRun, type Run } from './scenarios/throughput.js';

/**
 * `npx tsx test/bench/guarantee-cost.ts [ROUNDS] [N]` (after `npm run build`): what the
 * durability guarantees cost per message, isolated. The throughput scenario runs, interleaved
 * and each on its own fresh fakes, for:
 *
 * - shipped: this tree's dist/, state under the OS temp dir (a disk), as installed;
 * - tmpfs: the same build, state on /dev/shm: what the disk (fsync, page writes) costs;
 * - no-sync: a patched copy, state on /dev/shm, `journal_mode = MEMORY` and
 *   `synchronous = OFF`: SQLite with every durability step off, its b-tree work left;
 * - no-sqlite: a patched copy whose per-message writes never reach SQLite (the inbox insert
 *   hands out counter ids, the group commit drops what it is given): what is left when the
 *   durable inbox and sessions cost nothing;
 * - no-turn-line: the shipped build with the one info line each finished turn writes
 *   ("turn finished", what an operator greps for first) at debug, so not written: what that
 *   line costs, beside what the guarantees cost (it is a feature, not a guarantee);
 * - bare: the bare grammy echo bot.
 *
 * The patched copies are bench-only (under .channeld/, git-ignored) and break the guarantees
 * on purpose; each patch must match exactly once, so a refactor that moves the code fails here
 * loudly instead of measuring an unpatched build. Prints every round, then medians and ratios.
 */

const root = join(import.meta.dirname, '../..');
const variantsDir = join(root, '.channeld/guarantee-cost');

/** [what to find, what to put instead]: applied to the one bundle file that contains it. */
type Patch = [string, string];

const noSync: Patch[] = [
  ['db.pragma("journal_mode = WAL");', 'db.pragma("journal_mode = MEMORY");'],
  ['db.pragma("synchronous = NORMAL");', 'db.pragma("synchronous = OFF");'],
];

export const noSqlite: Patch[] = [
  ...noSync,
  // GroupCommit: queued and immediate writes are dropped (a queued write still reports itself
  // committed, so nothing waits on it); the writability probe says yes.
  ['  add(write, committed) {\n', '  add(write, committed) {\n    committed?.();\n    return;\n'],
  ['  now(write) {\n', '  now(write) {\n    return;\n'],
  ['  #probe() {\n', '  #probe() {\n    return true;\n'],
  // Inbox: the batch insert hands out ids without a statement.
  ['ids = this.#insertBatch(batch);', 'ids = batch.map(() => (globalThis.__benchInboxId = (globalThis.__benchInboxId ?? 0) + 1));'],
];

/** The per-turn "turn finished" line (src/workspace/execute.ts) logged at debug, below the fleet's info level. */
export const noTurnLine: Patch[] = [['deps.log.info({\n      ...where,\n      turn: job.id,', 'deps.log.debug({\n      ...where,\n      turn: job.id,']];

/**
 * Copies dist/ to `name` with `patches` applied to its bundle; returns the copy's entry script.
 * Throws when a patch does not match exactly once (the bench smoke test applies `noSqlite`, which holds `noSync`, and `noTurnLine`).
 */
export function variant(name: string, patches: Patch[]): string {
  const dir = join(variantsDir, name);
  rmSync(dir, { recursive: true, force: true });
  cpSync(join(root, 'dist'), dir, { recursive: true, verbatimSymlinks: true });
  const bundle = realpathSync(join(dir, 'bundle'));
  const files = readdirSync(bundle).filter((f) => f.endsWith('.js'));
  for (const [find, put] of patches) {
    const hits = files.filter((f) => readFileSync(join(bundle, f), 'utf8').split(find).length === 2);
    const total = files.reduce((n, f) => n + readFileSync(join(bundle, f), 'utf8').split(find).length - 1, 0);
    if (hits.length !== 1 || total !== 1) throw new Error(`${name}: patch ${JSON.stringify(find)} matched ${total} times, expected once`);
    const file = join(bundle, hits[0]!);
    writeFileSync(file, readFileSync(file, 'utf8').replace(find, put));
  }
  return join(dir, 'bundle/channeld.js');
}

/** A channeld run whose state directory is on tmpfs: the fleet takes its directory from the OS temp dir, read when it is made. */
async function onTmpfs(run: () => Promise<Run>): Promise<Run> {
  const saved = process.env.TMPDIR;
  process.env.TMPDIR = '/dev/shm';
  try {
    return await run();
  } finally {
    if (saved === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved;
  }
}

async function main(): Promise<void> {
  const [rounds = '3', count = '3000'] = process.argv.slice(2);
  const n = Number(count);
  const m = 50;
  const warm = 300;
  const noSyncScript = variant('no-sync', noSync);
  const noSqliteScript = variant('no-sqlite', noSqlite);
  const noTurnLineScript = variant('no-turn-line', noTurnLine);
  const sides = {
    shipped: () => channeldRun(n, m, warm),
    tmpfs: () => onTmpfs(() => channeldRun(n, m, warm)),
    'no-sync': () => onTmpfs(() => channeldRun(n, m, warm, true, noSyncScript)),
    'no-sqlite': () => onTmpfs(() => channeldRun(n, m, warm, true, noSqliteScript)),
    'no-turn-line': () => channeldRun(n, m, warm, true, noTurnLineScript),
    bare: () => bareRun(n, m, warm),
  };
  type Side = keyof typeof sides;
  const names = Object.keys(sides) as Side[];
  const runs = Object.fromEntries(names.map((k) => [k, [] as Run[]])) as Record<Side, Run[]>;
  for (let r = 0; r < Number(rounds); r++) {
    for (const k of names) runs[k].push(await sides[k]());
    console.log(
      `round ${r + 1}: ` + names.map((k) => `${k} ${runs[k].at(-1)!.rate.toFixed(0)} msg/s ${runs[k].at(-1)!.cpuPerMsgMs.toFixed(3)} ms`).join(' | '),
    );
  }
  const rate = (k: Side) => median(runs[k].map((x) => x.rate));
  const cpu = (k: Side) => median(runs[k].map((x) => x.cpuPerMsgMs));
  console.log('\n| side | msg/s | CPU/msg | rate / bare | CPU / bare | CPU / shipped |\n|---|---|---|---|---|---|');
  for (const k of names) {
    console.log(
      `| ${k} | ${rate(k).toFixed(0)} | ${cpu(k).toFixed(3)} ms | ${(rate(k) / rate('bare')).toFixed(2)} | ${(cpu(k) / cpu('bare')).toFixed(2)}× | ${(cpu(k) / cpu('shipped')).toFixed(2)} |`,
    );
  }
}

if (process.argv[1]?.endsWith('guarantee-cost.ts')) await main();
