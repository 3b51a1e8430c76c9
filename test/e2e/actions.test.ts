import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeEach, describe, expect, it } from 'vitest';
import { checkAdmin } from '../../src/actions/access.js';
import { pingAction } from '../fixtures/actions/ping.js';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import { withChat, withDaemon, withLlm } from '../helpers/fixtures.js';
import { echoAgent, llmAgent, webchatChannel } from '../helpers/toml.js';

const run = promisify(execFile);
const main = join(import.meta.dirname, '../../dist/bin/channeld.js');

describe('management actions', () => {
  let d: TestDaemon | undefined;
  let tabs = 0;
  beforeEach(() => {
    tabs = 0;
  });

  const body = (delay = 0) => echoAgent(delay) + webchatChannel();
  /** A config the CLI can use to reach the in-process daemon on its real port. */
  const cliConfig = (extra = '') => {
    const file = join(d!.dir, 'cli.config.toml');
    writeFileSync(
      file,
      `[daemon]\nstate_dir = "${join(d!.dir, 'state')}"\n[http]\nlisten = "127.0.0.1:${d!.daemon.address.port}"\n${extra}\n[[channels]]\nid = "web"\ntype = "webchat"\n`,
    );
    return file;
  };
  const cli = async (args: string[], env: NodeJS.ProcessEnv = {}) => {
    try {
      const { stdout } = await run(process.execPath, [main, ...args], { env: { PATH: process.env.PATH, ...env } });
      return { code: 0, stdout };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout + e.stderr };
    }
  };
  const chat = () => withChat(d!, `tab-${tabs++}`);

  it('an action added from a test-only file gets its HTTP route, CLI subcommand and slash command', async () => {
    d = await withDaemon(body());
    d.daemon.actions.register(pingAction);
    expect(await (await fetch(`${d.url}/actions/ping?word=hello`)).json()).toEqual({ reply: 'hello', face: 'http' });
    const viaCli = await cli(['ping', 'there', '--config', cliConfig()]);
    expect(viaCli).toEqual({ code: 0, stdout: 'there! (via http)\n' });
    const c = await chat();
    c.send('/ping marco');
    expect((await c.finals())[0]!.text).toBe('marco! (via slash)');
    c.send('/help');
    expect((await c.finals(2)).map((f) => f.text).join()).toContain('/ping WORD — ping the daemon');
  });

  it('the CLI and HTTP faces of status print the same data; the slash face shows the conversation', async () => {
    d = await withDaemon(body());
    const http = (await (await fetch(`${d.url}/status`)).json()) as Record<string, unknown>;
    const viaCli = await cli(['status', '--json', '--config', cliConfig()]);
    const fromCli = JSON.parse(viaCli.stdout) as Record<string, unknown>;
    for (const key of ['version', 'pid', 'generation', 'ready', 'channels', 'agents', 'last_reload']) expect(fromCli[key]).toEqual(http[key]);
    const table = await cli(['status', '--config', cliConfig()]);
    expect(table.stdout).toMatch(/^channeld \S+ +pid \d+/);
    expect(table.stdout).toMatch(/web +webchat +connected/);
    const c = await chat();
    c.send('/status');
    const [reply] = await c.finals();
    expect(reply!.text).toContain('Agent: default (echo)');
    expect(reply!.text).toContain('Queue mode: followup');
    expect(reply!.text).not.toContain('pid');
  });

  it('the slash status counts the messages waiting behind it in the conversation', async () => {
    d = await withDaemon(body(100));
    const c = await chat();
    c.send('one two three four five');
    c.send('/status');
    c.send('queued after status');
    const finals = await c.finals(3);
    expect(finals.find((f) => f.text!.startsWith('Agent:'))!.text).toContain('Waiting after this: 1');
  });

  it('channels, turns, sessions and version answer on HTTP and the CLI', async () => {
    d = await withDaemon(body());
    const c = await chat();
    c.send('hello');
    await c.finals();
    expect(await (await fetch(`${d.url}/actions/channels`)).json()).toEqual([expect.objectContaining({ id: 'web', kind: 'webchat', state: 'connected' })]);
    expect(await (await fetch(`${d.url}/actions/turns`)).json()).toEqual([]);
    expect(await (await fetch(`${d.url}/actions/sessions`)).json()).toEqual([
      { channel: 'web', agent: 'default', conversations: 1, sessions: 1, last_activity: expect.any(String) },
    ]);
    expect((await cli(['version', '--config', cliConfig()])).stdout).toMatch(/^channeld \S+ \(node v\d+/);
    expect((await cli(['sessions', '--config', cliConfig()])).stdout).toMatch(/^web +default +1 +1 /m);
  });

  it('stop-turn stops a running turn by id; bad input gets 400 with the schema message; unknown ids 404', async () => {
    // The model writes one word and then waits until the turn is stopped: the turn is running
    // for as long as the CLI takes to start, however busy the machine is.
    const llm = await withLlm();
    llm.script({ kind: 'stream', chunks: [{ content: 'one ' }, { content: 'two', after: new Promise(() => {}) }] });
    d = await withDaemon(llmAgent(llm.url) + webchatChannel());
    const c = await chat();
    c.send('one two');
    const [turn] = await waitFor(async () => {
      const list = (await (await fetch(`${d!.url}/actions/turns`)).json()) as Array<{ id: string; state: string }>;
      return list.length && list[0]!.state === 'running' ? list : undefined;
    });
    const bad = await fetch(`${d.url}/actions/stop-turn`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: string }).error).toMatch(/id/);
    expect(
      (await fetch(`${d.url}/actions/stop-turn`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ id: '99999' }) }))
        .status,
    ).toBe(404);
    const viaCli = await cli(['stop-turn', turn!.id, '--config', cliConfig()]);
    expect(viaCli.stdout).toBe(`turn ${turn!.id} cancelled\n`);
    const [final] = await c.finals();
    expect(final!.text).toMatch(/^one\s+⏹ Stopped\.$/);
    expect((await cli(['reload', '--config', cliConfig()])).stdout).toMatch(/^reloaded: generation 2/);
  });

  it('with an admin token, a tokenless or wrong-token request is refused and the right token is accepted', async () => {
    d = await withDaemon(body(), { ADMIN: 'admin-secret-42' }, '', 'admin_token_env = "ADMIN"\n');
    expect((await fetch(`${d.url}/status`)).status).toBe(401);
    expect((await fetch(`${d.url}/actions/channels`, { headers: { authorization: 'Bearer nope' } })).status).toBe(401);
    expect((await fetch(`${d.url}/actions/channels`, { headers: { authorization: 'Bearer admin-secret-42' } })).status).toBe(200);
    expect((await cli(['channels', '--config', cliConfig('admin_token_env = "ADMIN"')], { ADMIN: 'admin-secret-42' })).stdout).toMatch(
      /web +webchat +connected/,
    );
    expect((await fetch(`${d.url}/healthz`)).status).toBe(200);
  });

  it('without a token, only loopback clients are served', () => {
    const req = (remoteAddress: string, authorization?: string) => ({ headers: authorization ? { authorization } : {}, socket: { remoteAddress } }) as never;
    const url = new URL('http://x/actions/status');
    expect(checkAdmin(req('127.0.0.1'), url, undefined)).toBe('ok');
    expect(checkAdmin(req('::1'), url, undefined)).toBe('ok');
    expect(checkAdmin(req('192.168.1.20'), url, undefined)).toBe('forbidden');
    expect(checkAdmin(req('10.0.0.5', 'Bearer anything'), url, undefined)).toBe('forbidden');
    expect(checkAdmin(req('10.0.0.5', 'Bearer s3cret'), url, 's3cret')).toBe('ok');
    expect(checkAdmin(req('127.0.0.1'), url, 's3cret')).toBe('unauthorized');
    expect(checkAdmin(req('10.0.0.5'), new URL('http://x/admin/events?token=s3cret'), 's3cret')).toBe('ok');
  });
});
