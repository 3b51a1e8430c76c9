import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/daemon.js';
import { FIXTURE_ENTRY, TSX_NODE_ARGS } from '../helpers/fixture-entry.js';
import { DaemonProcess } from '../helpers/process.js';
import { shippedKinds } from '../fixtures/kinds.js';
import type { PostboxReply } from '../fixtures/channels/postbox/adapter.js';

/**
 * The test-only postbox kind (test/fixtures/channels/postbox), added by one line in
 * test/fixtures/channeld-with-fixture.ts: nothing under src/ names it, yet `check` validates
 * its keys and a real daemon process answers through it.
 */
describe('a channel kind from a folder outside src/, in a real daemon process', () => {
  const cleanup: Array<() => void> = [];
  afterEach(() => {
    for (const c of cleanup.splice(0).reverse()) c();
  });

  function setup(channel: string): string {
    const dir = mkdtempSync(join(tmpdir(), 'channeld-fixture-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'daemon.config.toml');
    writeFileSync(
      file,
      `[daemon]\nstate_dir = "${join(dir, 'state')}"\nshutdown_grace_ms = 2000\n\n[http]\nlisten = "127.0.0.1:0"\n\n[agent]\nprovider = "echo"\necho_delay_ms = 20\n\n${channel}`,
    );
    return file;
  }

  /** Runs the fixture entry's CLI to its end. */
  async function cli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
    const child = spawn(process.execPath, [...TSX_NODE_ARGS, FIXTURE_ENTRY, ...args], {
      env: { PATH: process.env.PATH, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    cleanup.push(() => child.kill('SIGKILL'));
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += String(d)));
    child.stderr.on('data', (d: Buffer) => (stderr += String(d)));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    return { code, stdout, stderr };
  }

  it("`channeld check` reports the kind's bad key with file:line:col and exits 78; `--help` lists the kind", async () => {
    const file = setup(`[[channels]]\nid = "lb"\ntype = "postbox"\nallow_from = ["*"]\nkey_env = "LB_KEY"\nmax_message_lenght = 100\n`);
    const check = await cli(['check', '--config', file], { LB_KEY: 'k-123456' });
    expect(check.stderr.split('\n')[0]).toBe(
      'daemon.config.toml:17:1: channels[0].max_message_lenght: unknown key "max_message_lenght"; did you mean `max_message_length`?',
    );
    expect(check.code).toBe(78);
    const help = await cli(['--help']);
    // The fixture kind is listed after the last shipped kind, whichever that is.
    const last = shippedKinds[shippedKinds.length - 1]!;
    expect(help.stdout).toMatch(new RegExp(`^ {2}${last.kind} +.*\\n {2}postbox +test only: messages posted over HTTP, replies read back$`, 'm'));
  });

  it('takes a message over its own HTTP route and the echo agent answers through it', async () => {
    const file = setup(`[[channels]]\nid = "lb"\ntype = "postbox"\nallow_from = ["*"]\nkey_env = "LB_KEY"\npath = "/lb"\n`);
    const p = new DaemonProcess(file, { LB_KEY: 'k-123456' }, TSX_NODE_ARGS, FIXTURE_ENTRY);
    cleanup.push(() => p.child.kill('SIGKILL'));
    const url = await p.url(30_000);
    await waitFor(async () => (await fetch(`${url}/readyz`)).status === 200, 30_000);
    const auth = { authorization: 'Bearer k-123456', 'content-type': 'application/json' };

    const refused = await fetch(`${url}/lb/lb/messages`, {
      method: 'POST',
      headers: { ...auth, authorization: 'Bearer wrong' },
      body: JSON.stringify({ chat: 'c1', sender: 'u1', text: 'no' }),
    });
    expect(refused.status).toBe(401);

    const posted = await fetch(`${url}/lb/lb/messages`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ chat: 'c1', sender: 'u1', text: 'hello through the postbox' }),
    });
    expect(posted.status).toBe(202);
    expect(await posted.json()).toMatchObject({ stored: true });

    const replies = await waitFor(async () => {
      const list = (await (await fetch(`${url}/lb/lb/replies`, { headers: auth })).json()) as PostboxReply[];
      return list.some((r) => r.final) ? list : undefined;
    }, 15_000);
    expect(replies).toEqual([{ chatId: 'c1', messageId: 'r1', text: 'hello through the postbox', final: true }]);

    p.signal('SIGTERM');
    expect(await p.exited).toBe(0);
  });
});
