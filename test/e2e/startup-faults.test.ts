import { execFile, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { DaemonProcess } from '../helpers/process.js';
import { scaled } from '../helpers/timing.js';

const run = promisify(execFile);
const main = join(import.meta.dirname, '../../dist/bin/channeld.js');

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [main, ...args], { env: { PATH: process.env.PATH }, timeout: 20_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

const dirs: string[] = [];
/** A config in a temp dir; "@" in `daemon` stands for that dir. */
function config(daemon: string, listen = '127.0.0.1:0'): { dir: string; file: string } {
  const dir = mkdtempSync(join(tmpdir(), 'channeld-start-'));
  dirs.push(dir);
  const file = join(dir, 'daemon.config.toml');
  writeFileSync(file, `[daemon]\n${daemon.replace('@', dir)}\n\n[http]\nlisten = "${listen}"\n\n[[channels]]\nid = "web"\ntype = "webchat"\n`);
  return { dir, file };
}

/** The exit status, or a failure if the process is still running after `ms` (the old hang), stretched by the time scale. */
async function exitOf(p: DaemonProcess, idleMs = 20_000): Promise<number | null> {
  const ms = scaled(idleMs);
  let timer: NodeJS.Timeout | undefined;
  const code = await Promise.race([p.exited, new Promise<'running'>((r) => (timer = setTimeout(() => r('running'), ms)))]);
  clearTimeout(timer);
  if (code === 'running') {
    p.signal('SIGKILL');
    throw new Error(`still running after ${ms} ms: ${JSON.stringify(p.lines.slice(-5))}`);
  }
  return code;
}

describe('start-up and process faults', () => {
  const cleanup: Array<() => void> = [];
  afterEach(() => {
    for (const c of cleanup.splice(0)) c();
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it('check refuses a port out of range, an address that does not parse and a state_dir that is a file, with their lines', async () => {
    const port = config('state_dir = "@/s"', '127.0.0.1:99999');
    let r = await cli(['check', '--config', port.file]);
    expect(r.code).toBe(78);
    expect(r.stderr).toMatch(/daemon\.config\.toml:5:\d+: http\.listen: port 99999 is out of range/);
    const host = config('state_dir = "@/s"', '999.1.1.1:8080');
    r = await cli(['check', '--config', host.file]);
    expect(r.code).toBe(78);
    expect(r.stderr).toMatch(/daemon\.config\.toml:5:\d+: http\.listen: "999\.1\.1\.1" is not an IPv4 address/);
    const fileDir = config('state_dir = "/etc/hostname"');
    r = await cli(['check', '--config', fileDir.file]);
    expect(r.code).toBe(78);
    expect(r.stderr).toMatch(/daemon\.config\.toml:2:\d+: daemon\.state_dir: "\/etc\/hostname" is a file, not a directory/);
    // ...and run agrees: nothing starts.
    r = await cli(['run', '--config', fileDir.file]);
    expect(r.code).toBe(78);
  });

  it('a listen address that check cannot know is unbindable (not this machine) exits 78 naming [http] listen', async () => {
    const { file } = config('state_dir = "@/s"', '192.0.2.1:8080');
    const p = new DaemonProcess(file);
    expect(await exitOf(p)).toBe(78);
    expect(JSON.stringify(p.lines)).toContain('[http] listen = \\"192.0.2.1:8080\\": EADDRNOTAVAIL');
  });

  it('state_dir = "/proc/nope" exits 78 at once instead of hanging in mkdir', async () => {
    const { file } = config('state_dir = "/proc/nope"');
    const p = new DaemonProcess(file);
    expect(await exitOf(p)).toBe(78);
    expect(JSON.stringify(p.lines)).toContain('state_dir \\"/proc/nope\\" cannot be created');
  });

  it('a failure after the HTTP server is up (the pid file cannot be written) stops the server and exits 1', async () => {
    const { dir, file } = config('state_dir = "@/state"');
    // The pid file's path is taken by a directory: writing it fails after HTTP listens.
    mkdirSync(join(dir, 'state', 'channeld.pid'), { recursive: true });
    const p = new DaemonProcess(file);
    cleanup.push(() => p.signal('SIGKILL'));
    expect(await exitOf(p)).toBe(1);
    expect(JSON.stringify(p.lines)).toContain('EISDIR');
  });

  it('reload with a stale pid file whose pid is now another program does not signal it', async () => {
    const { dir, file } = config('state_dir = "@/state"', '127.0.0.1:1');
    const stranger = spawn('sleep', ['600'], { stdio: 'ignore' });
    cleanup.push(() => stranger.kill('SIGKILL'));
    mkdirSync(join(dir, 'state'), { recursive: true });
    writeFileSync(join(dir, 'state', 'channeld.pid'), `${stranger.pid}\n`);
    const r = await cli(['reload', '--config', file]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`not signalling pid ${stranger.pid}`);
    expect(r.stderr).toContain('stale');
    // SIGHUP would have ended `sleep`; it is still running.
    expect(stranger.exitCode).toBe(null);
    expect(stranger.signalCode).toBe(null);
    expect(() => process.kill(stranger.pid!, 0)).not.toThrow();
  });
});
