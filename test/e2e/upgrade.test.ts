import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it, onTestFinished } from 'vitest';
import { waitFor } from '../helpers/daemon.js';
import { withLlm, withTempDir } from '../helpers/fixtures.js';
import { discordChannel, discordEnv, telegramChannel, telegramEnv, withDiscord, withTelegram } from '../helpers/platforms.js';
import { withDaemonProcess, writeProcessConfig } from '../helpers/process.js';
import { scaled } from '../helpers/timing.js';
import { killRecordedDaemonAtEnd, pidOf, pollHealth } from '../helpers/upgrade.js';
import { echoAgent, llmAgent } from '../helpers/toml.js';

const cli = join(import.meta.dirname, '../../dist/bin/channeld.js');
/** Why the systemd test cannot run here, if it cannot. */
const systemdWhy = systemdMissing();

/** `channeld <args>` as the operator runs it: its exit status and output. */
function channeld(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [cli, ...args], { env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += String(d)));
    child.stderr.on('data', (d: Buffer) => (out += String(d)));
    // 'close', not 'exit': the output pipes are read to their end.
    child.once('close', (code) => resolve({ code, out }));
  });
}

describe('channeld upgrade, real processes', () => {
  it(
    '60 Telegram messages over 20 s with an upgrade in the middle: each answered once, /healthz never refused, a new pid, Discord resumed',
    async () => {
      const tg = await withTelegram();
      const dc = await withDiscord();
      const dir = withTempDir('upgrade');
      const file = writeProcessConfig(dir, `${echoAgent(150)}${telegramChannel(tg)}${discordChannel(dc)}`);
      const env = { ...telegramEnv(tg), ...discordEnv(dc) };
      const old = withDaemonProcess(file, env);
      killRecordedDaemonAtEnd(dir);
      const url = await old.url();
      await waitFor(async () => (await fetch(`${url}/readyz`)).status === 200, 15_000);
      await waitFor(() => dc.gateway.identifies === 1, 15_000);
      const oldPid = pidOf(dir);
      expect(oldPid).toBe(old.child.pid);

      const health = pollHealth(url);
      // Six conversations, a message every 333 ms (60 over 20 s); each answer takes four words
      // 150 ms apart, so turns are likely running when the hand-over happens. The pace is a
      // schedule, not a sleep after each send, so a slow machine does not stretch it.
      const users = Array.from({ length: 6 }, (_, i) => ({ id: 1000 + i, first_name: `U${i}` }));
      const texts = Array.from({ length: 60 }, (_, i) => `msg-${i} one two three`);
      let upgrade: Promise<{ code: number | null; out: string }> | undefined;
      let due = Date.now();
      for (const [i, text] of texts.entries()) {
        tg.dm(text, users[i % users.length]);
        if (i === 10) upgrade = channeld(['upgrade', '--config', file]);
        // However slow the new process is to start here, the second half arrives after the
        // old one handed Telegram's polling over, so the hand-over is in the middle (only a
        // loaded machine waits here; the rest of the schedule moves by as long).
        if (i === 29) {
          const held = Date.now();
          await waitFor(() => old.lines.some((l) => l.msg === 'upgrade: listener stopped for the new process' && l.channel === 'tg'), 60_000);
          due += Date.now() - held;
        }
        due += 333;
        await sleep(Math.max(0, due - Date.now()));
      }
      const result = await upgrade!;
      if (result.code !== 0)
        console.error(
          result.out,
          old.lines.filter((l) => String(l.msg).includes('upgrade')),
        );
      expect(result.out).toMatch(/upgraded: pid \d+/);
      expect(result.code).toBe(0);
      expect(await old.exited).toBe(0);
      const newPid = pidOf(dir);
      expect(newPid).not.toBe(oldPid);

      const answered = () => users.flatMap((u) => tg.texts(u.id));
      await waitFor(() => texts.every((t) => answered().includes(t)), 20_000);
      // Settled: every update confirmed and no turn running or queued in the new process.
      await waitFor(
        async () => tg.pendingUpdates === 0 && ((await (await fetch(`${url}/status`)).json()) as { turns: { list: unknown[] } }).turns.list.length === 0,
      );
      const { polls, failed } = await health.stop();
      expect(failed).toEqual([]);
      expect(polls).toBeGreaterThan(100);
      expect(answered().sort()).toEqual([...texts].sort());
      expect(tg.callsOf('sendMessage')).toHaveLength(60);

      // The gateway session went on in the new process: RESUME, no second IDENTIFY.
      await waitFor(() => dc.gateway.resumes >= 1, 10_000);
      expect(dc.gateway.identifies).toBe(1);
      // And it still delivers: a Discord DM after the upgrade is answered by the new process.
      dc.dm('after the upgrade');
      await waitFor(() => dc.texts(dc.dmChannel).includes('after the upgrade'), 10_000);

      process.kill(newPid, 'SIGTERM');
      await waitFor(() => {
        try {
          process.kill(newPid, 0);
          return false;
        } catch {
          return true;
        }
      }, 15_000);
    },
    scaled(90_000),
  );

  it(
    'a new build that fails to start, or fails after taking a listener: the old one still answers and the CLI exits 78 with the reason',
    async () => {
      const tg = await withTelegram();
      const dir = withTempDir('upgrade-fail');
      const file = writeProcessConfig(dir, `${echoAgent(0)}${telegramChannel(tg)}`);
      const bad = join(dir, 'broken-build.sh');
      writeFileSync(bad, '#!/bin/sh\necho "broken build: cannot start" >&2\nexit 1\n');
      chmodSync(bad, 0o755);
      const old = withDaemonProcess(file, telegramEnv(tg));
      const url = await old.url();
      await waitFor(async () => (await fetch(`${url}/readyz`)).status === 200, 15_000);

      const result = await channeld(['upgrade', '--exec', bad, '--config', file]);
      expect(result.code).toBe(78);
      expect(result.out).toMatch(/upgrade failed, the running daemon carries on: .*exited \(status 1\) before it was ready/);
      expect(pidOf(dir)).toBe(old.child.pid);
      tg.dm('still here');
      await waitFor(() => tg.texts(42).includes('still here'), 15_000);

      // One that gets as far as taking Telegram's listener over, then fails with a reason of
      // its own: polling runs in the old process again.
      const halfway = join(dir, 'halfway-build.mjs');
      writeFileSync(
        halfway,
        `process.on('message', (m) => {
        if (m.t !== 'taken') return;
        process.send({ t: 'failed', reason: 'STORAGE_TOO_NEW: a test build that gives up after taking the listener' }, () => process.exit(78));
      });
      process.send({ t: 'take', channel: 'tg' });\n`,
      );
      const second = await channeld(['upgrade', '--exec', halfway, '--config', file]);
      expect(second.code).toBe(78);
      expect(second.out).toContain('STORAGE_TOO_NEW: a test build that gives up after taking the listener');
      // The old process logs it asynchronously: the CLI can have exited before the line crossed the pipe.
      await waitFor(() => old.lines.some((l) => l.msg === 'upgrade: listener stopped for the new process' && l.channel === 'tg'), 10_000);
      tg.dm('and still here');
      await waitFor(() => tg.texts(42).includes('and still here'), 15_000);
      old.signal('SIGTERM');
      expect(await old.exited).toBe(0);
    },
    scaled(60_000),
  );

  // The reason this machine lacks is in the test's name, so every report shows it, and on
  // stderr, so `npm test`'s own output (which lists files, not skipped tests) shows it too.
  if (systemdWhy) console.warn(`skipped: channeld upgrade under systemd: ${systemdWhy}`);
  it.skipIf(systemdWhy !== undefined)(
    `under systemd (Type=notify, NotifyAccess=all): the unit follows the new main pid and stays active${systemdWhy ? ` (skipped: ${systemdWhy})` : ''}`,
    async () => {
      const tg = await withTelegram();
      const dir = withTempDir('upgrade-systemd');
      const file = writeProcessConfig(dir, `${echoAgent(0)}${telegramChannel(tg)}`);
      const unit = `channeld-upgrade-test-${process.pid}-${Date.now()}`;
      const show = (prop: string) => spawnSync('systemctl', ['show', '-p', prop, '--value', unit], { encoding: 'utf8' }).stdout.trim();
      const run = spawnSync(
        'systemd-run',
        [
          `--unit=${unit}`,
          '-p',
          'Type=notify',
          '-p',
          'NotifyAccess=all',
          '-p',
          'KillMode=mixed',
          `--setenv=TG_TOKEN=${tg.token}`,
          `--setenv=PATH=${process.env.PATH}`,
          process.execPath,
          cli,
          'run',
          '--config',
          file,
        ],
        { encoding: 'utf8' },
      );
      expect(run.status, run.stderr).toBe(0);
      onTestFinished(() => void spawnSync('systemctl', ['stop', unit]));
      await waitFor(() => show('ActiveState') === 'active', 30_000);
      const before = Number(show('MainPID'));
      const result = await channeld(['upgrade', '--config', file]);
      expect(result.code, result.out).toBe(0);
      await waitFor(() => Number(show('MainPID')) !== before && show('ActiveState') === 'active', 30_000);
      await waitFor(() => {
        try {
          process.kill(before, 0);
          return false;
        } catch {
          return true;
        }
      }, 30_000);
      expect(show('ActiveState')).toBe('active');
      expect(Number(show('MainPID'))).toBe(pidOf(dir));
    },
  );

  // The new process took a second upgrade while it still held back the old process's
  // running turn: the third process knew of neither and answered the same message again.
  it('a second upgrade while the first hand-over waits for the old turn is refused, and the message is answered once', async () => {
    const tg = await withTelegram();
    const llm = await withLlm();
    const dir = withTempDir('upgrade-twice');
    // The model's answer is held until the second upgrade has been refused: the turn still
    // runs in the old process for as long as the test needs, however slow the machine.
    let release = (): void => {};
    const held = new Promise<void>((r) => (release = r));
    llm.script({ kind: 'stream', chunks: [{ content: 'one ' }, { content: 'two', after: held }] });
    // A grace longer than the test: the old process's stop must not cut the held turn.
    const file = writeProcessConfig(dir, `${llmAgent(llm.url)}${telegramChannel(tg)}`, 'shutdown_grace_ms = 600000\n');
    const old = withDaemonProcess(file, telegramEnv(tg));
    killRecordedDaemonAtEnd(dir);
    const url = await old.url();
    await waitFor(async () => (await fetch(`${url}/readyz`)).status === 200, 15_000);
    tg.dm('hello');
    await waitFor(() => tg.callsOf('sendMessage').length >= 1, 15_000);

    const first = await channeld(['upgrade', '--config', file]);
    expect(first.code).toBe(0);
    const second = await channeld(['upgrade', '--config', file]);
    release();
    expect(second.out).toMatch(/hand-over has not finished/);
    expect(second.code).toBe(78);
    const newPid = pidOf(dir);
    expect(old.lines.some((l) => l.pid === newPid && l.msg === 'upgrade refused' && l.code === 'UPGRADE_IN_PROGRESS')).toBe(true);

    expect(await old.exited).toBe(0);
    await waitFor(() => old.lines.some((l) => l.pid === newPid && l.msg === "upgrade: the old process's turns ended; their conversations go on here"), 30_000);
    expect(old.lines.filter((l) => l.msg === 'turn finished')).toHaveLength(1);
    expect(llm.requests).toHaveLength(1);
    // Its hand-over finished: the new process takes an upgrade again (not run here).
  }, 90_000);
});

/** Why the systemd check cannot run here, or undefined when it can (systemd as PID 1, systemd-run, root). */
function systemdMissing(): string | undefined {
  if (!existsSync('/run/systemd/system')) return 'systemd is not running on this machine (no /run/systemd/system: PID 1 is not systemd, as in most containers)';
  if (spawnSync('systemd-run', ['--version']).status !== 0) return 'systemd-run is not installed';
  if (process.getuid?.() !== 0) return 'starting a transient system unit with systemd-run needs root';
  return undefined;
}
