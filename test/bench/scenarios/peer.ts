import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { FakeTelegram } from '../../fakes/telegram/server.js';
import { waitFor } from '../../helpers/daemon.js';
import { cpuMs, Fleet, rssMb } from '../fleet.js';
import { median, type Row, type ScenarioOptions } from '../report.js';
import { drive, timed } from './throughput.js';

/** The three Telegram echo bots compared, each on its own fresh fake Bot API. */
const kinds = ['channeld', 'grammy', 'chat-sdk'] as const;
type Kind = (typeof kinds)[number];

const label: Record<Kind, string> = {
  channeld: 'channeld (web chat + Telegram)',
  grammy: 'bare grammy echo bot',
  'chat-sdk': 'Chat SDK (chat + @chat-adapter/telegram, memory state)',
};

/** One run of one bot: start-up, idle memory, then the timed messages. */
interface PeerRun {
  /** Spawn → its first getUpdates call (each bot polls once it is set up), and the CPU spent until then. */
  startMs: number;
  startCpuMs: number;
  /** RSS after start-up and one quiet second. */
  idleRssMb: number;
  rate: number;
  cpuPerMsgMs: number;
  callsPerMsg: number;
}

interface Bot {
  pid: number;
  tg: FakeTelegram;
  stop(): Promise<void>;
}

/** Starts one bot of `kind` on its own fake; resolves once it has spawned (not yet polling). */
async function launch(kind: Kind): Promise<Bot> {
  if (kind === 'channeld') {
    const fleet = await new Fleet().start();
    fleet.write({ only: 'telegram' });
    const p = fleet.spawn();
    return {
      pid: p.child.pid!,
      tg: fleet.tg,
      stop: async () => {
        p.signal('SIGTERM');
        await p.exited;
        await fleet.close();
      },
    };
  }
  const tg = new FakeTelegram();
  await tg.start();
  const script = kind === 'grammy' ? 'grammy-echo.mjs' : 'chat-sdk-echo.mjs';
  const child = spawn(process.execPath, [join(import.meta.dirname, '../bare', script)], {
    env: { PATH: process.env.PATH, TG: tg.token, API_ROOT: tg.url },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const exited = new Promise((r) => child.once('exit', r));
  return {
    pid: child.pid!,
    tg,
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
      await tg.close();
    },
  };
}

async function run(kind: Kind, n: number, m: number, warm: number): Promise<PeerRun> {
  const t0 = performance.now();
  const bot = await launch(kind);
  try {
    await waitFor(() => bot.tg.callsOf('getUpdates').length > 0, 120_000, 2);
    const startMs = performance.now() - t0;
    const startCpuMs = cpuMs(bot.pid);
    await new Promise((r) => setTimeout(r, 1000));
    const idleRssMb = rssMb(bot.pid);
    await drive(bot.tg, warm, m, 'warm');
    const t = await timed(bot.pid, n, bot.tg, () => drive(bot.tg, n, m, 'run'));
    const callsPerMsg = Object.values(t.callsPerMsg).reduce((a, b) => a + b, 0);
    return { startMs, startCpuMs, idleRssMb, rate: t.rate, cpuPerMsgMs: t.cpuPerMsgMs, callsPerMsg };
  } finally {
    await bot.stop();
  }
}

/**
 * A peer in the bench: channeld (web chat + Telegram, every guarantee on), a bare grammy echo
 * bot and the Vercel Chat SDK's Telegram adapter, each on its own fake Bot API with the same
 * messages. Rounds alternate the three (channeld, grammy, Chat SDK, …) and medians are compared:
 * throughput, CPU per message, Bot API calls per message, start-up (spawn → first getUpdates,
 * wall and CPU) and idle RSS.
 */
export async function peer(o: ScenarioOptions): Promise<Row[]> {
  const n = o.smoke ? 20 : 3000;
  const m = o.smoke ? 5 : 50;
  const warm = o.smoke ? 5 : 300;
  const rounds = o.smoke ? 1 : 3;
  const runs: Record<Kind, PeerRun[]> = { channeld: [], grammy: [], 'chat-sdk': [] };
  for (let r = 0; r < rounds; r++) for (const k of kinds) runs[k].push(await run(k, n, m, warm));
  const med = (k: Kind, f: keyof PeerRun) => median(runs[k].map((x) => x[f]));
  const rows: Row[] = [];
  for (const k of kinds) {
    rows.push(
      { scenario: 'peer', metric: `${label[k]}: throughput, ${n} messages over ${m} chats, median of ${rounds}`, value: med(k, 'rate'), unit: 'msg/s' },
      { scenario: 'peer', metric: `${label[k]}: CPU per message`, value: med(k, 'cpuPerMsgMs'), unit: 'ms' },
      { scenario: 'peer', metric: `${label[k]}: Bot API calls per message (long polls excluded)`, value: med(k, 'callsPerMsg'), unit: 'calls' },
      { scenario: 'peer', metric: `${label[k]}: start-up, spawn → first getUpdates`, value: med(k, 'startMs'), unit: 'ms' },
      { scenario: 'peer', metric: `${label[k]}: CPU until polling`, value: med(k, 'startCpuMs'), unit: 'ms' },
      { scenario: 'peer', metric: `${label[k]}: idle RSS`, value: med(k, 'idleRssMb'), unit: 'MB' },
    );
  }
  for (const base of ['grammy', 'chat-sdk'] as const) {
    const rate = med('channeld', 'rate') / med(base, 'rate');
    rows.push(
      {
        scenario: 'peer',
        metric: `channeld / ${base}: throughput`,
        value: rate,
        unit: '×',
        ...(base === 'grammy' ? { target: '≥ 0.9', met: rate >= 0.9 } : {}),
      },
      { scenario: 'peer', metric: `channeld / ${base}: CPU per message`, value: med('channeld', 'cpuPerMsgMs') / med(base, 'cpuPerMsgMs'), unit: '×' },
      { scenario: 'peer', metric: `channeld / ${base}: start-up`, value: med('channeld', 'startMs') / med(base, 'startMs'), unit: '×' },
      { scenario: 'peer', metric: `channeld / ${base}: idle RSS`, value: med('channeld', 'idleRssMb') / med(base, 'idleRssMb'), unit: '×' },
    );
  }
  return rows;
}
