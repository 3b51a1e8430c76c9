import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/daemon.js';
import { FIXTURE_ENTRY, TSX_NODE_ARGS } from '../helpers/fixture-entry.js';
import { withDaemonProcess } from '../helpers/process.js';
import type { PostboxReply } from '../fixtures/channels/postbox/adapter.js';

const KEY = 'k-schedules-1';
const auth = { authorization: `Bearer ${KEY}` };

/** A six-field pattern that fires once a year, at the second `atMs` falls in, read in `timeZone`. */
function yearlyIn(timeZone: string, atMs: number): string {
  const parts = Object.fromEntries(
    new Intl.DateTimeFormat('en-GB', { timeZone, hourCycle: 'h23', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric' })
      .formatToParts(new Date(atMs))
      .map((p) => [p.type, Number(p.value)]),
  );
  return `${parts.second} ${parts.minute} ${parts.hour} ${parts.day} ${parts.month} *`;
}

/** `[[schedules]]` in a real daemon process (the test-only postbox kind). */
describe('[[schedules]] in a real daemon process', () => {
  const dir = mkdtempSync(join(tmpdir(), 'channeld-schedules-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'daemon.config.toml');
  const base = `[daemon]\nstate_dir = "${join(dir, 'state')}"\nshutdown_grace_ms = 2000\n\n[http]\nlisten = "127.0.0.1:0"\n\n[agent]\nprovider = "echo"\necho_delay_ms = 5\n\n[[channels]]\nid = "lb"\ntype = "postbox"\nallow_from = ["nobody"]\nkey_env = "LB_KEY"\npath = "/lb"\n`;
  const schedule = (cron: string) =>
    `\n[[schedules]]\nid = "tick"\nchannel = "lb"\nchat = "c9"\ncron = "${cron}"\ntimezone = "Europe/Berlin"\nprompt = "tick tock"\n`;

  it('`check` names a bad cron pattern with file:line:col and exits 78', () => {
    writeFileSync(file, base + schedule('61 * * * *'));
    const r = spawnSync(process.execPath, [...TSX_NODE_ARGS, FIXTURE_ENTRY, 'check', '--config', file], {
      env: { PATH: process.env.PATH, LB_KEY: KEY },
      encoding: 'utf8',
    });
    expect(r.stderr).toMatch(/^daemon\.config\.toml:\d+:\d+: schedules\[0\]\.cron: not a cron pattern/m);
    expect(r.status).toBe(78);
    writeFileSync(file, `${base}${schedule('0 9 * * *').replace('channel = "lb"', 'channel = "nope"')}agent = "ghost"\n`);
    const r2 = spawnSync(process.execPath, [...TSX_NODE_ARGS, FIXTURE_ENTRY, 'check', '--config', file], {
      env: { PATH: process.env.PATH, LB_KEY: KEY },
      encoding: 'utf8',
    });
    expect(r2.stderr).toMatch(/schedules\[0\]\.channel: schedule "tick" posts to channel "nope", which is not defined/);
    expect(r2.stderr).toMatch(/schedules\[0\]\.agent: schedule "tick" names agent "ghost", which is not defined or is disabled/);
    expect(r2.status).toBe(78);
  });

  it('refuses a pattern that fires more than once a minute, naming the key and line', () => {
    writeFileSync(file, base + schedule('*/2 * * * * *'));
    const r = spawnSync(process.execPath, [...TSX_NODE_ARGS, FIXTURE_ENTRY, 'check', '--config', file], {
      env: { PATH: process.env.PATH, LB_KEY: KEY },
      encoding: 'utf8',
    });
    expect(r.stderr).toMatch(/^daemon\.config\.toml:\d+:\d+: schedules\[0\]\.cron: fires 30 times a minute \(its seconds field is "\*\/2"\)/m);
    expect(r.status).toBe(78);
  });

  it('runs an agent turn with the prompt at its firing (past allow_from), shows the next firing, and stops on reload', async () => {
    // One firing a few seconds ahead, once a year in the schedule's zone: catch_up = "last"
    // runs it even when a loaded machine starts the daemon after that second.
    writeFileSync(file, `${base + schedule(yearlyIn('Europe/Berlin', Date.now() + 3000))}catch_up = "last"\n`);
    const p = withDaemonProcess(file, { LB_KEY: KEY }, TSX_NODE_ARGS, FIXTURE_ENTRY);
    const url = await p.url(30_000);
    const replies = async () => (await (await fetch(`${url}/lb/lb/replies`, { headers: auth })).json()) as PostboxReply[];
    const status = async () => (await (await fetch(`${url}/status`)).json()) as { schedules: Array<{ id: string; next_fire_at: string | null }> };
    const first = await waitFor(async () => (await replies()).find((r) => r.final), 30_000);
    expect(first).toMatchObject({ chatId: 'c9', text: 'tick tock' });
    const [tick] = (await status()).schedules;
    expect(tick!.id).toBe('tick');
    expect(Date.parse(tick!.next_fire_at!)).toBeGreaterThan(Date.now() - 2000);
    expect(await (await fetch(`${url}/metrics`)).text()).toMatch(/^channeld_schedule_next_fire_timestamp_seconds\{schedule="tick"\} \d+$/m);
    expect(await (await fetch(`${url}/metrics`)).text()).toMatch(/^channeld_firings_total\{source="schedule",outcome="(fired|caught_up)"\} 1$/m);

    writeFileSync(file, base);
    p.signal('SIGHUP');
    await waitFor(async () => (await status()).schedules.length === 0, 30_000);
    await waitFor(async () => !/channeld_schedule_next_fire_timestamp_seconds\{/.test(await (await fetch(`${url}/metrics`)).text()), 30_000);
    p.signal('SIGTERM');
    expect(await p.exited).toBe(0);
  });
});
