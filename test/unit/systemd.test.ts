import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const unit = join(import.meta.dirname, '../../systemd/channeld.service');
const hasAnalyze = spawnSync('systemd-analyze', ['--version']).status === 0;
/** Loads built-in modules the daemon loads, then prints how many Node compiled without its code cache. */
const PROBE = `for (const m of ['http', 'https', 'tls', 'zlib', 'crypto', 'net', 'worker_threads']) require(m);
const { internalBinding } = require('internal/test/binding');
console.log([...internalBinding('builtins').getCacheUsage().compiledWithoutCache].length);`;

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
    const v8Flags = /^Environment="CHANNELD_V8_FLAGS=([^"]*)"$/m.exec(text)?.[1];
    const start = (JSON.parse(readFileSync(join(import.meta.dirname, '../../package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start;
    expect(exec).not.toBeNull();
    expect(malloc).toHaveLength(2);
    // exec: npm's child is the daemon itself, so the TERM or INT npm forwards stops it.
    expect(v8Flags).toBe('--heap-growing-percent=10 --expose-gc');
    expect(start.endsWith(`&& exec env ${malloc.join(' ')} CHANNELD_V8_FLAGS='${v8Flags}' node ${exec![1]} ${exec![2]} run`)).toBe(true);
  });

  it("keeps the code cache Node's built-in modules ship with: no node flag that V8 counts against it beyond the semi-space cap", () => {
    const text = readFileSync(unit, 'utf8');
    const nodeArgs = /^ExecStart=\S+ (.*) \/opt\/channeld\/\S+ run$/m.exec(text)![1]!.split(' ');
    // What Node compiled without its cache, after loading what the daemon loads for the web chat and the SDKs.
    const uncached = (args: string[]) => {
      const r = spawnSync(process.execPath, [...args, '--expose-internals', '--no-warnings', '-e', PROBE], { encoding: 'utf8' });
      expect(r.stderr).toBe('');
      return Number(r.stdout.trim());
    };
    // V8 12 (Node 22) counts the semi-space cap against the cache too; V8 13 and later (Node 24, 26) do not.
    expect(uncached(nodeArgs)).toBe(uncached(['--max-semi-space-size=8']));
    if (Number(process.versions.node.split('.')[0]) >= 24) expect(uncached(nodeArgs)).toBe(0);
  });

  it('passes systemd-analyze verify', (ctx) => {
    // The reason shows in the report beside the skipped test.
    if (!hasAnalyze) ctx.skip('systemd-analyze is not installed on this machine (Debian: package systemd)');
    const r = spawnSync('systemd-analyze', ['verify', unit], { encoding: 'utf8' });
    expect({ status: r.status, output: (r.stderr + r.stdout).trim() }).toEqual({ status: 0, output: '' });
  });
});
