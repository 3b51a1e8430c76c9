import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const unit = join(import.meta.dirname, '../../systemd/channeld.service');
const hasAnalyze = spawnSync('systemd-analyze', ['--version']).status === 0;

describe('systemd unit', () => {
  it('has the settings the operator relies on', () => {
    const text = readFileSync(unit, 'utf8');
    for (const line of [
      // The daemon says READY=1 itself; after `channeld upgrade` the new process sends MAINPID=.
      'Type=notify',
      'NotifyAccess=all',
      // The CLI waits for the outcome and exits 78 on a refusal, so `systemctl reload` fails then (kill -HUP always succeeds).
      'ExecReload=/usr/bin/node /opt/channeld/dist/bin/channeld.js reload',
      'Restart=on-failure',
      'RestartPreventExitStatus=78',
      'StateDirectory=channeld',
      'NoNewPrivileges=yes',
      'ProtectSystem=strict',
      'ProtectHome=yes',
      'PrivateTmp=yes',
      '#LoadCredential=',
    ]) {
      expect(text).toContain(line);
    }
    expect(text).toMatch(/^User=(?!root)\w+/m);
  });

  it("runs node with the same malloc settings, flags and script as `npm start` (the benches measure the unit's)", () => {
    const text = readFileSync(unit, 'utf8');
    const exec = /^ExecStart=\S+ (.*) \/opt\/channeld\/(\S+) run$/m.exec(text);
    const malloc = [...text.matchAll(/^Environment=(MALLOC_\w+=\S+)$/gm)].map((m) => m[1]);
    const start = (JSON.parse(readFileSync(join(import.meta.dirname, '../../package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start;
    expect(exec).not.toBeNull();
    expect(malloc).toHaveLength(2);
    // exec: npm's child is the daemon itself, so the TERM or INT npm forwards stops it.
    expect(start.endsWith(`&& exec env ${malloc.join(' ')} node ${exec![1]} ${exec![2]} run`)).toBe(true);
  });

  it('passes systemd-analyze verify', (ctx) => {
    // The reason shows in the report beside the skipped test.
    if (!hasAnalyze) ctx.skip('systemd-analyze is not installed on this machine (Debian: package systemd)');
    const r = spawnSync('systemd-analyze', ['verify', unit], { encoding: 'utf8' });
    expect({ status: r.status, output: (r.stderr + r.stdout).trim() }).toEqual({ status: 0, output: '' });
  });
});
