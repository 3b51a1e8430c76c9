import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { waitFor } from '../helpers/daemon.js';
import { scaled } from '../helpers/timing.js';
import { operatorConfig, runCli, tempDir } from '../helpers/operator.js';
import { telegramChannel, telegramEnv, withTelegram } from '../helpers/platforms.js';
import { DaemonProcess } from '../helpers/process.js';

/**
 * The README's operator path as a new operator walks it, every step a real process on the
 * Node running the tests: install the packed command, start with `npm start`, use the CLI
 * from another directory, a refused reload, a backup, stopping with a signal, and an upgrade
 * (a changed build) while the daemon runs.
 */
const repo = join(import.meta.dirname, '../..');
/** npm as the operator runs it: the one on PATH (with the node on PATH first, as CI sets it). */
const npm = 'npm';
const hasNpm = spawnSync(npm, ['--version']).status === 0;
const ADMIN = 'walkthrough-admin-token';

/** Runs a command to its end; resolves with its exit code and output. */
function exec(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d));
    child.stderr.on('data', (d: Buffer) => (out += d));
    child.once('exit', (code) => resolve({ code, out }));
  });
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe("the README's operator walk-through", () => {
  it(
    'npm pack makes a package that installs into a fresh prefix and runs channeld --help and check from another directory',
    async (ctx) => {
      if (!hasNpm) ctx.skip('npm is not on PATH');
      const work = tempDir('pack');
      const packed = await exec(npm, ['pack', '--pack-destination', work], repo);
      expect(packed.code, packed.out).toBe(0);
      const tarball = readdirSync(work).find((f) => f.endsWith('.tgz'))!;
      expect(existsSync(join(repo, 'npm-shrinkwrap.json'))).toBe(false);
      // --ignore-scripts: no native build here (the SQLite addon loads only for run and backup).
      const prefix = join(work, 'prefix');
      const installed = await exec(
        npm,
        ['install', '--global', '--prefix', prefix, '--prefer-offline', '--ignore-scripts', '--no-audit', '--no-fund', join(work, tarball)],
        work,
      );
      expect(installed.code, installed.out).toBe(0);
      const bin = join(prefix, 'bin', 'channeld');
      const elsewhere = tempDir('pack-cwd');
      const help = await exec(bin, ['--help'], elsewhere);
      expect(help.code, help.out).toBe(0);
      expect(help.out).toMatch(/^Usage: channeld <command>/m);
      const file = operatorConfig(tempDir('pack-home'));
      const check = await exec(bin, ['check', '--config', file], elsewhere, { ADMIN });
      expect(check.out).toMatch(/^ok/m);
      expect(check.code).toBe(0);
    },
    scaled(300_000),
  );

  it(
    'npm start (no rebuild when nothing changed), the CLI from another directory, reload refused → 78, backup 0600, TERM on npm stops the daemon',
    async (ctx) => {
      if (!hasNpm) ctx.skip('npm is not on PATH');
      const home = tempDir('walk-home');
      const elsewhere = tempDir('walk-cwd');
      const file = operatorConfig(home);
      const npmStart = spawn(npm, ['start'], { cwd: repo, env: { ...process.env, CHANNELD_CONFIG: file, ADMIN }, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      npmStart.stdout.on('data', (d: Buffer) => (out += d));
      npmStart.stderr.on('data', (d: Buffer) => (out += d));
      const npmExited = new Promise<number | null>((resolve) => npmStart.once('exit', (code) => resolve(code)));
      onTestFinished(() => void npmStart.kill('SIGKILL'));
      await waitFor(() => out.includes('"msg":"ready"'), 60_000, 50);
      expect(out).toContain('the build is up to date');
      const pid = Number(readFileSync(join(home, 'state', 'channeld.pid'), 'utf8'));
      onTestFinished(() => void (alive(pid) && process.kill(pid, 'SIGKILL')));

      const env = { CHANNELD_CONFIG: file, CHANNELD_ADMIN_TOKEN: ADMIN };
      const status = await runCli(['status'], elsewhere, env);
      expect(status.code, status.stderr).toBe(0);
      expect(status.stdout).toMatch(/^web +webchat +connected/m);

      writeFileSync(file, readFileSync(file, 'utf8').replace('listen = "127.0.0.1:0"', 'listen = "127.0.0.1:18080"'));
      const reload = await runCli(['reload'], elsewhere, env);
      expect(reload.stdout).toContain('[http] listen changed');
      expect(reload.code).toBe(78);

      const backup = await runCli(['backup', 'state-copy.db'], elsewhere, env);
      expect(backup.code, backup.stderr).toBe(0);
      expect(statSync(join(elsewhere, 'state-copy.db')).mode & 0o777).toBe(0o600);

      npmStart.kill('SIGTERM');
      await npmExited;
      await waitFor(() => !alive(pid), 20_000, 20);
      expect(existsSync(join(home, 'state', 'channeld.pid'))).toBe(false);
    },
    scaled(180_000),
  );

  it(
    'an upgrade rebuilds while the daemon runs: a reload that starts a channel loads it from the running build',
    async () => {
      // Builds go to their own folder under dist/ (the bundle finds node_modules above it), never to the repo's own dist/bundle.
      const dist = join(repo, 'dist', `walkthrough-${process.pid}-${Date.now()}`);
      mkdirSync(dist, { recursive: true });
      onTestFinished(() => rmSync(dist, { recursive: true, force: true }));
      const bundle = (note: string) =>
        exec(process.execPath, [join(repo, 'scripts/bundle.mjs')], repo, { CHANNELD_BUNDLE_DIR: dist, CHANNELD_BUILD_NOTE: note });
      expect((await bundle('walkthrough build 1')).code).toBe(0);

      const tg = await withTelegram();
      const home = tempDir('upgrade-home');
      const file = operatorConfig(home);
      const p = new DaemonProcess(file, { ADMIN, ...telegramEnv(tg) }, [], join(dist, 'bundle', 'channeld.js'));
      onTestFinished(() => void p.child.kill('SIGKILL'));
      const url = await p.url();
      const first = readdirSync(join(dist, 'builds')).filter((d) => d !== 'current');

      // The upgrade: a changed build (every chunk renamed) switched in while the daemon runs.
      const rebuilt = await bundle('walkthrough build 2');
      expect(rebuilt.code, rebuilt.out).toBe(0);
      expect(readdirSync(join(dist, 'builds')).filter((d) => d !== 'current' && !first.includes(d))).toHaveLength(1);

      // A reload that starts a Telegram channel: its code was never loaded, so it comes from a chunk now.
      writeFileSync(file, `${readFileSync(file, 'utf8')}\n${telegramChannel(tg)}`);
      const reload = await runCli(['reload'], home, { CHANNELD_CONFIG: file, CHANNELD_ADMIN_TOKEN: ADMIN });
      expect(reload.code, reload.stdout + reload.stderr).toBe(0);
      const channel = await waitFor(async () => {
        const s = (await (await fetch(`${url}/status`, { headers: { authorization: `Bearer ${ADMIN}` } })).json()) as {
          channels: Array<{ id: string; state: string; last_error: string | null }>;
        };
        const tgStatus = s.channels.find((c) => c.id === 'tg');
        return tgStatus && tgStatus.state !== 'starting' && tgStatus.state !== 'connecting' ? tgStatus : undefined;
      }, 30_000);
      expect(channel).toMatchObject({ state: 'connected' });
    },
    scaled(180_000),
  );
});
