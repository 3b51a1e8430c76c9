import { waitFor } from '../../helpers/daemon.js';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { FakeTelegram } from '../../fakes/telegram/server.js';
import { Fleet } from '../fleet.js';
import type { Row, ScenarioOptions } from '../report.js';

/** Pushes `n` DMs over `m` chats and waits until each has its reply; returns messages per second. */
async function drive(tg: FakeTelegram, n: number, m: number, label: string): Promise<number> {
  const before = tg.messages.length;
  const t0 = performance.now();
  for (let i = 0; i < n; i++) tg.dm(`${label} message ${i}`, { id: 1000 + (i % m), first_name: `user${i % m}` });
  await waitFor(() => tg.messages.length - before >= n, 120_000, 2);
  return n / ((performance.now() - t0) / 1000);
}

/**
 * Throughput: the whole pipeline (fake Telegram → grammy → inbox → dispatch → runtime →
 * echo agent → ReplyStream → fake Telegram) against a bare grammy echo bot on the same fake.
 */
export async function throughput(o: ScenarioOptions): Promise<Row[]> {
  const n = o.smoke ? 20 : 3000;
  const m = o.smoke ? 5 : 50;
  const warm = o.smoke ? 5 : 300;

  const fleet = await new Fleet().start();
  let channeld: number;
  try {
    fleet.write();
    const p = fleet.spawn();
    try {
      await waitFor(() => fleet.dc.connected && fleet.sl.socketOpen && fleet.tg.callsOf('getUpdates').length > 0, 30_000);
      await drive(fleet.tg, warm, m, 'warm');
      channeld = await drive(fleet.tg, n, m, 'run');
    } finally {
      p.signal('SIGTERM');
      await p.exited;
    }
  } finally {
    await fleet.close();
  }

  const tg = new FakeTelegram();
  await tg.start();
  let bare: number;
  const child = spawn(process.execPath, [join(import.meta.dirname, '../bare/grammy-echo.mjs')], { env: { PATH: process.env.PATH, TG: tg.token, API_ROOT: tg.url }, stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    await new Promise<void>((r) => child.stdout!.once('data', () => r()));
    await drive(tg, warm, m, 'warm');
    bare = await drive(tg, n, m, 'run');
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    await tg.close();
  }
  const ratio = channeld / bare;
  return [
    { scenario: 'throughput', metric: `channeld, ${n} messages over ${m} chats`, value: channeld, unit: 'msg/s' },
    { scenario: 'throughput', metric: 'bare grammy echo bot, same fake and messages', value: bare, unit: 'msg/s' },
    { scenario: 'throughput', metric: 'ratio channeld / bare', value: ratio, unit: '×', target: '≥ 0.8', met: ratio >= 0.8 },
  ];
}
