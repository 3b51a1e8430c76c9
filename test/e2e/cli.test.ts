import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const main = join(import.meta.dirname, '../../dist/bin/channeld.js');

async function cli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [main, ...args], { env: { PATH: process.env.PATH, ...env } });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

function configFile(body: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'channeld-cli-'));
  const file = join(dir, 'daemon.config.toml');
  writeFileSync(file, body);
  return file;
}

describe('channeld CLI (built)', () => {
  it('check prints ok and exits 0 for a valid config', async () => {
    const r = await cli(['check', '--config', configFile('[[channels]]\nid = "web"\ntype = "webchat"\n')]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^ok/);
  });

  it('check prints every error with its line and exits 78', async () => {
    const r = await cli(['check', '--config', configFile('[daemon]\nnope = 1\n[[channels]]\nid = "x"\ntype = "telgram"\n')]);
    expect(r.code).toBe(78);
    expect(r.stderr).toContain('daemon.config.toml:2:1: daemon.nope: unknown key "nope"');
    expect(r.stderr).toContain('daemon.config.toml:5:8: channels[0].type: "telgram" is not one of');
  });

  it('check exits 78 for a missing secret and names the channel', async () => {
    const r = await cli(['check', '--config', configFile('[[channels]]\nid = "tg"\ntype = "telegram"\nallow_from = ["*"]\ntoken_env = "NOT_SET_HERE"\n')]);
    expect(r.code).toBe(78);
    expect(r.stderr).toMatch(/NOT_SET_HERE is not set.*channel "tg"/);
  });

  it('check warns about a config without channels and still exits 0', async () => {
    const r = await cli(['check', '--config', configFile('[daemon]\nlog_level = "info"\n')]);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/^warning: .* has no enabled channels/);
  });

  it('CHANNELD_CONFIG names the config file when --config is not given', async () => {
    const r = await cli(['check'], { CHANNELD_CONFIG: configFile('[[channels]]\nid = "from-env"\ntype = "webchat"\n') });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('from-env (webchat)');
  });

  it('run names daemon.state_dir and the path when the database cannot be created there', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'channeld-cli-'));
    writeFileSync(join(dir, 'a-file'), '');
    const stateDir = join(dir, 'a-file', 'state');
    const r = await cli([
      'run',
      '--config',
      configFile(`[daemon]\nstate_dir = "${stateDir}"\n[http]\nlisten = "127.0.0.1:0"\n[[channels]]\nid = "web"\ntype = "webchat"\n`),
    ]);
    // Caught while the config is validated, with its line: the operator's problem, exit 78.
    expect(r.code).toBe(78);
    expect(r.stderr).toContain(`daemon.state_dir: "${stateDir}" cannot be created: ${join(dir, 'a-file')} is a file, not a directory`);
  });

  it('check exits 78 when the file does not exist', async () => {
    const r = await cli(['check', '--config', '/nonexistent/daemon.config.toml']);
    expect(r.code).toBe(78);
    expect(r.stderr).toContain('ENOENT');
  });

  it('run exits 78 on an invalid config instead of starting', async () => {
    const r = await cli(['run', '--config', configFile('[limits]\nmax_in_flight = 0\n')]);
    expect(r.code).toBe(78);
    expect(r.stderr).toContain('limits.max_in_flight');
  });

  it('--help explains each command', async () => {
    for (const cmd of ['run', 'check', 'status', 'reload']) {
      const r = await cli([cmd, '--help']);
      expect(r.code).toBe(0);
      expect(r.stdout).toContain(`Usage: channeld ${cmd}`);
    }
    expect((await cli(['--help'])).stdout).toContain('Exit status');
    const stop = await cli(['stop-turn', '--help']);
    expect(stop.code).toBe(0);
    expect(stop.stdout).toMatch(/^Usage: channeld stop-turn ID \[--config FILE\]/);
    expect((await cli(['--help'])).stdout).toMatch(/^ {2}stop-turn ID +stop a running turn/m);
  }, 90_000);

  it('status says clearly when no daemon answers', async () => {
    const r = await cli(['status', '--config', configFile('[http]\nlisten = "127.0.0.1:1"\n[[channels]]\nid = "web"\ntype = "webchat"\n')]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/no daemon answers/);
  });
});
