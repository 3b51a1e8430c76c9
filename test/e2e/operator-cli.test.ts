import { readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/daemon.js';
import { scaled } from '../helpers/timing.js';
import { operatorConfig, runCli, tempDir } from '../helpers/operator.js';
import { withDaemonProcess } from '../helpers/process.js';

const ADMIN = 'admin-token-for-operator';

/** A daemon process on an operator config in its own folder; the CLI runs from another, config-less one. */
async function started() {
  const home = tempDir('op-home');
  const elsewhere = tempDir('op-cwd');
  const file = operatorConfig(home);
  const p = withDaemonProcess(file, { ADMIN });
  const url = await p.url();
  await waitFor(async () => (await fetch(`${url}/readyz`)).status === 200, 15_000);
  return { home, elsewhere, file, p, url, state: join(home, 'state') };
}

describe('the operator CLI as real processes from a directory without the config', () => {
  it(
    'reload after [http] listen was edited reaches the daemon where it runs and exits 78, by HTTP and by SIGHUP',
    async () => {
      const { elsewhere, file, state, url } = await started();
      expect(readFileSync(join(state, 'channeld.url'), 'utf8').trim()).toBe(url);
      writeFileSync(file, readFileSync(file, 'utf8').replace('listen = "127.0.0.1:0"', 'listen = "127.0.0.1:1"'));
      const env = { ADMIN, CHANNELD_CONFIG: file };
      const viaHttp = await runCli(['reload'], elsewhere, env);
      expect(viaHttp.stdout).toContain('[http] listen changed');
      expect(viaHttp.code).toBe(78);

      // No HTTP answer where the CLI is told to look (scheme-less --url): SIGHUP, and the CLI waits for the outcome.
      const viaSignal = await runCli(['reload', '--url', '127.0.0.1:1'], elsewhere, env);
      expect(viaSignal.stderr).toContain('sent SIGHUP');
      expect(viaSignal.stdout).toContain('[http] listen changed');
      expect(viaSignal.code).toBe(78);

      // A valid change goes through by SIGHUP too, and says so.
      writeFileSync(
        file,
        readFileSync(file, 'utf8')
          .replace('listen = "127.0.0.1:1"', 'listen = "127.0.0.1:0"')
          .replace('provider = "echo"', 'provider = "echo"\necho_delay_ms = 5'),
      );
      const applied = await runCli(['reload', '--url', '127.0.0.1:1'], elsewhere, env);
      expect(applied).toMatchObject({ code: 0, stdout: 'reloaded: generation 2\n' });
      // A daemon that recorded no address (an earlier build) is still reached by SIGHUP through its pid file.
      rmSync(join(state, 'channeld.url'));
      writeFileSync(file, `${readFileSync(file, 'utf8')}\n[agent]\nprovider = "echo"\n`);
      const broken = await runCli(['reload'], elsewhere, { ...env, CHANNELD_CONFIG: file });
      expect(broken.stdout).toContain('refused, the running config stays');
      expect(broken.code).toBe(78);
    },
    scaled(120_000),
  );

  it(
    'CHANNELD_ADMIN_TOKEN and --token-file work without a config file; --url takes host:port',
    async () => {
      const { elsewhere, url } = await started();
      const hostPort = url.replace('http://', '');
      const byEnv = await runCli(['status'], elsewhere, { CHANNELD_URL: url, CHANNELD_ADMIN_TOKEN: ADMIN });
      expect(byEnv.stderr).toBe('');
      expect(byEnv.code).toBe(0);
      expect(byEnv.stdout).toMatch(/^web +webchat +connected/m);
      const tokenFile = join(elsewhere, 'admin-token');
      writeFileSync(tokenFile, `${ADMIN}\n`, { mode: 0o600 });
      const byFile = await runCli(['channels', '--url', hostPort, '--token-file', tokenFile], elsewhere);
      expect(byFile.stderr).toBe('');
      expect(byFile.code).toBe(0);
      expect(byFile.stdout).toMatch(/^web +webchat +connected/m);
      const wrong = await runCli(['status', '--url', hostPort], elsewhere, { CHANNELD_ADMIN_TOKEN: 'not-it' });
      expect(wrong.code).toBe(1);
      expect(wrong.stderr).toContain("$CHANNELD_ADMIN_TOKEN is not the daemon's admin token");
      const none = await runCli(['status', '--url', hostPort], elsewhere);
      expect(none.stderr).toContain('CHANNELD_ADMIN_TOKEN');
      expect((await runCli(['status', '--url', 'http://[::1'], elsewhere)).stderr).toContain('is not a URL');
    },
    scaled(60_000),
  );

  it(
    'backup from another directory finds the relative state_dir next to the config and writes a 0600 copy',
    async () => {
      const { elsewhere, file, state } = await started();
      expect(statSync(join(state, 'channeld.db')).isFile()).toBe(true);
      const r = await runCli(['backup', 'copy.db', '--config', file], elsewhere);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(statSync(join(elsewhere, 'copy.db')).mode & 0o777).toBe(0o600);
    },
    scaled(60_000),
  );

  it(
    'a listen address in use exits 78 and says so in the operator words',
    async () => {
      const home = tempDir('op-busy');
      const busy = createServer();
      await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
      const { port } = busy.address() as { port: number };
      try {
        const file = operatorConfig(home, '', `127.0.0.1:${port}`);
        const r = await runCli(['run', '--config', file], tempDir('op-cwd'), { ADMIN });
        expect(r.stderr).toContain(`127.0.0.1:${port} is already in use by another process`);
        expect(r.code).toBe(78);
      } finally {
        busy.close();
      }
    },
    scaled(60_000),
  );

  it(
    'check warns about secrets of the wrong shape and a leftover echo_delay_ms, naming where and what is expected, and still exits 0',
    async () => {
      const home = tempDir('op-check');
      const file = join(home, 'daemon.config.toml');
      writeFileSync(
        file,
        `[agent]\nprovider = "openai-compatible"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\necho_delay_ms = 5\n\n` +
          `[[channels]]\nid = "sl"\ntype = "slack"\nbot_token_env = "SL_BOT"\napp_token_env = "SL_APP"\nallow_from = ["*"]\n\n` +
          `[[channels]]\nid = "tg"\ntype = "telegram"\ntoken_env = "TG"\nallow_from = ["*"]\n`,
      );
      const env = { SL_BOT: 'xapp-1-A0-123-abcdef', SL_APP: 'xapp-1-A0-456-fedcba', TG: 'notatoken' };
      const r = await runCli(['check', '--config', file], tempDir('op-cwd'), env);
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/^ok/);
      const lines = r.stderr.split('\n');
      expect(lines).toContain(
        'daemon.config.toml:5:1: agent.echo_delay_ms: warning: only the echo provider reads it; agent "default" uses openai-compatible, so it has no effect (remove it)',
      );
      expect(lines.find((l) => l.startsWith('daemon.config.toml:10:1: channels[0].bot_token_env: warning:'))).toContain('"xoxb-…"');
      expect(lines.find((l) => l.startsWith('daemon.config.toml:17:1: channels[1].token_env: warning:'))).toContain('BotFather');
      expect(r.stderr).not.toContain('app_token_env');
      expect(r.stderr).not.toContain('notatoken');
    },
    scaled(60_000),
  );
});
