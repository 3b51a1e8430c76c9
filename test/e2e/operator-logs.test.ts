import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/daemon.js';
import { channeldBin, operatorConfig, tempDir } from '../helpers/operator.js';
import { withDaemonProcess } from '../helpers/process.js';

const preload = join(import.meta.dirname, '../fixtures/operator/warn-on-listen.mjs');
/** util-linux `script` runs a command on a pseudo-terminal: stdout is a TTY there. */
const hasScript = spawnSync('script', ['--version']).status === 0;

describe('the daemon process output', () => {
  it("routes Node's process warnings through the logger: one warn line each, stdout and stderr stay JSON", async () => {
    const p = withDaemonProcess(operatorConfig(tempDir('warn')), { ADMIN: 'x' }, ['--import', preload]);
    await p.url();
    // The warnings come while the HTTP server starts; "ready" is logged after start.
    await waitFor(() => p.lines.some((l) => l.msg === 'ready'), 15_000);
    const warns = p.lines.filter((l) => l.level === 40 && typeof l.msg === 'string' && l.msg.startsWith('node: '));
    expect(warns.map((w) => (w.warning as { code: string }).code).sort()).toEqual(['DEP0040', 'DEP0169']);
    // DaemonProcess keeps a line that is not JSON as { msg } alone: none may exist.
    expect(p.lines.filter((l) => !('level' in l))).toEqual([]);
  });

  it('pretty-prints on a terminal, JSON otherwise', async (ctx) => {
    if (!hasScript) ctx.skip('util-linux script is not installed (Debian: package bsdutils)');
    const file = operatorConfig(tempDir('tty'));
    const child = spawn('script', ['-qec', `${process.execPath} ${channeldBin} run --config ${file}`, '/dev/null'], {
      env: { PATH: process.env.PATH, ADMIN: 'x' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d));
    const exited = new Promise((resolve) => child.once('exit', resolve));
    try {
      await waitFor(() => /INFO.*channeld started/.test(out), 15_000);
      expect(out).not.toContain('{"level"');
    } finally {
      // `script` does not pass SIGTERM on, and its closing pty sends the daemon SIGHUP (a
      // reload): stop the daemon itself, found by its config path, then `script`.
      spawnSync('pkill', ['-TERM', '-f', file]);
      await waitFor(() => spawnSync('pgrep', ['-f', file]).status !== 0, 15_000);
      child.kill('SIGTERM');
      await exited;
    }
  });
});
