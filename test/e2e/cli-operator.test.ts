import Database from 'better-sqlite3';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import { withChat, withDaemon } from '../helpers/fixtures.js';

const run = promisify(execFile);
const main = join(import.meta.dirname, '../../dist/bin/channeld.js');

/**
 * The management CLI as an operator runs it: from another directory, in a shell that has
 * the admin token but none of the daemon's channel secrets, while the config file on disk
 * has errors. Every command must still show the daemon's data.
 */
describe("management CLI without the daemon's secrets, against a broken config file", () => {
  let d: TestDaemon | undefined;

  const ADMIN = 'admin-secret-for-cli';
  const channels = `[[channels]]\nid = "web"\ntype = "webchat"\naccess_token_env = "WEB_TOKEN"\n\n[[channels]]\nid = "tg"\ntype = "telegram"\nenabled = false\nallow_from = ["*"]\ntoken_credential = "tg-token"\n`;
  const body = `[agent]\nprovider = "echo"\necho_delay_ms = 500\n\n${channels}`;
  const cwd = mkdtempSync(join(tmpdir(), 'channeld-cli-cwd-'));
  const cli = async (args: string[], env: NodeJS.ProcessEnv) => {
    try {
      const { stdout, stderr } = await run(process.execPath, [main, ...args], { cwd, env: { PATH: process.env.PATH, ...env } });
      return { code: 0, stdout, stderr };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  };

  async function brokenSetUp() {
    const creds = mkdtempSync(join(tmpdir(), 'channeld-creds-'));
    writeFileSync(join(creds, 'tg-token'), '123:daemon-only\n');
    d = await withDaemon(body, { WEB_TOKEN: 'web-secret', ADMIN, CREDENTIALS_DIRECTORY: creds }, '', 'admin_token_env = "ADMIN"\n');
    const c = await withChat(d, 'tab-ops', { token: 'web-secret' });
    c.send(Array.from({ length: 120 }, (_, i) => `w${i}`).join(' '));
    const [turn] = await waitFor(async () => {
      const list = d!.daemon.turns();
      return list.length && list[0]!.state === 'running' ? list : undefined;
    });
    // The file on disk now has a typo, an unknown key and an unterminated string.
    writeFileSync(
      d.configFile,
      `[daemon]\nstate_dir = "${join(d.dir, 'state')}"\nlog_levl = "info"\n[http]\nlisten = "127.0.0.1:${d.daemon.address.port}"\nadmin_token_env = "ADMIN"\n\n${channels}\n[agent]\nsystem_prompt = "unterminated\n`,
    );
    // The operator's shell: the admin token, the config path, no channel secret, no credentials.
    return { turn: turn!, env: { ADMIN, CHANNELD_CONFIG: d.configFile } };
  }

  it("status, channels, turns, sessions, version and stop-turn print the daemon's data; reload of the broken file exits 78", async () => {
    const { turn, env } = await brokenSetUp();
    const status = await cli(['status'], env);
    expect(status.stderr).toBe('');
    expect(status).toMatchObject({ code: 0 });
    expect(status.stdout).toMatch(/^CHANNEL +KIND +STATE +SINCE +ATTEMPTS +CONNECTS/m);
    expect(status.stdout).toMatch(/^web +webchat +connected/m);
    const channels = await cli(['channels'], env);
    expect(channels.code).toBe(0);
    expect(channels.stdout).toMatch(/^CHANNEL +KIND +STATE/);
    expect(channels.stdout).toMatch(/^web +webchat +connected/m);
    const turns = await cli(['turns'], env);
    expect(turns.code).toBe(0);
    expect(turns.stdout).toMatch(/^ID +STATE +AGENT +CHANNEL +CONVERSATION +MODEL +STARTED/);
    expect(turns.stdout).toMatch(new RegExp(`^${turn.id} +running +default +web +web:tab-ops +echo `, 'm'));
    const turnsJson = JSON.parse((await cli(['turns', '--json'], env)).stdout) as Array<Record<string, unknown>>;
    expect(Object.keys(turnsJson[0]!)).toEqual(expect.arrayContaining(['queued_at', 'started_at']));
    const sessions = await cli(['sessions'], env);
    expect(sessions.code).toBe(0);
    expect(sessions.stdout).toMatch(/^CHANNEL +AGENT +CONVERSATIONS +SESSIONS +LAST ACTIVITY/);
    expect(sessions.stdout).toMatch(/^web +default +1 +1 /m);
    expect((await cli(['version'], env)).stdout).toMatch(/^channeld \S+ \(node v\d+/);
    const stop = await cli(['stop-turn', turn.id], env);
    expect(stop).toMatchObject({ code: 0, stdout: `turn ${turn.id} cancelled\n` });

    const reload = await cli(['reload'], env);
    expect(reload.code).toBe(78);
    expect(reload.stdout).toContain('refused, the running config stays');
    expect(reload.stdout).toContain('unterminated string');
    const after = JSON.parse((await cli(['status', '--json'], env)).stdout) as { last_reload: { ok: boolean; errors: string[] }; generation: number };
    expect(after.last_reload.ok).toBe(false);
    expect(after.generation).toBe(1);
    expect((await cli(['status'], env)).stdout).toMatch(/last reload .*: refused/);
  }, 120_000);

  it('check --against-daemon asks the daemon, in its environment, without applying; plain check says which environment it used', async () => {
    const { env } = await brokenSetUp();
    const remote = await cli(['check', '--against-daemon'], env);
    expect(remote.code).toBe(78);
    expect(remote.stdout).toContain('the daemon would refuse');
    expect(remote.stdout).toContain('unterminated string');
    expect(d!.daemon.status().last_reload).toBeNull();

    // Fixed on disk: the daemon accepts it (its WEB_TOKEN and credential resolve) though this shell has neither.
    d!.rewrite(body);
    const ok = await cli(['check', '--against-daemon', '--url', d!.url], env);
    expect(ok).toMatchObject({ code: 0 });
    expect(ok.stdout).toMatch(/^ok: the daemon would accept/);
    expect(d!.daemon.status().generation).toBe(1);
    const local = await cli(['check'], env);
    expect(local.code).toBe(78);
    expect(local.stderr).toContain('WEB_TOKEN is not set');
    expect(local.stderr).toContain('$CREDENTIALS_DIRECTORY is not set');
    expect(local.stderr).toMatch(/resolved in this shell's environment .*check --against-daemon/);
  }, 60_000);

  it('--url and CHANNELD_URL reach the daemon with no config file; a missing admin token is named', async () => {
    d = await withDaemon(`[[channels]]\nid = "web"\ntype = "webchat"\n`, { ADMIN }, '', 'admin_token_env = "ADMIN"\n');
    const nowhere = join(cwd, 'absent.toml');
    // Without a config file the CLI cannot know the token's variable: the refusal names the ways that need none.
    const noToken = await cli(['status', '--url', d.url], { CHANNELD_CONFIG: nowhere });
    expect(noToken.code).toBe(1);
    expect(noToken.stderr).toMatch(/admin bearer token.*CHANNELD_ADMIN_TOKEN.*--token-file/);
    const cfgDir = join(cwd, 'only-http');
    mkdirSync(cfgDir, { recursive: true });
    const httpOnly = join(cfgDir, 'daemon.config.toml');
    writeFileSync(httpOnly, `[http]\nadmin_token_env = "ADMIN"\n`);
    const unset = await cli(['channels', '--url', d.url, '--config', httpOnly], {});
    expect(unset.stderr).toContain('export ADMIN');
    const viaEnv = await cli(['channels'], { CHANNELD_URL: d.url, CHANNELD_CONFIG: httpOnly, ADMIN });
    expect(viaEnv).toMatchObject({ code: 0 });
    expect(viaEnv.stdout).toMatch(/^web +webchat +connected/m);
  }, 60_000);

  it('backup copies the database while the daemon runs, from the broken file, without secrets', async () => {
    const { env } = await brokenSetUp();
    const target = join(cwd, `backup-${Date.now()}.db`);
    const r = await cli(['backup', target], env);
    expect(r.stderr).toBe('');
    expect(r).toMatchObject({ code: 0 });
    expect(r.stdout).toContain(`to ${target}`);
    const copy = new Database(target, { readonly: true });
    try {
      expect(copy.prepare('SELECT count(*) AS n FROM inbox').get()).toEqual({ n: 1 });
    } finally {
      copy.close();
    }
    expect((await cli(['backup', target], env)).stderr).toContain('exists');
  }, 60_000);
});
