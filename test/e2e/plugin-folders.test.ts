import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { FakeLlm } from '../fakes/llm/server.js';
import { startDaemon, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { DaemonProcess } from '../helpers/process.js';
import { scaled } from '../helpers/timing.js';
import { ChatClient } from '../helpers/webchat-client.js';

const run = promisify(execFile);
const main = join(import.meta.dirname, '../../dist/bin/channeld.js');
const fixtures = join(import.meta.dirname, '../fixtures/plugins');

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [main, ...args], { env: { PATH: process.env.PATH }, timeout: scaled(20_000) });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/** A config in its own temp dir whose `[daemon] plugins` names `folders` relative to the file. */
function setup(folders: string[], agent = '[agent]\nprovider = "echo"\necho_delay_ms = 0\n') {
  const dir = mkdtempSync(join(tmpdir(), 'channeld-plugins-'));
  const file = join(dir, 'daemon.config.toml');
  const plugins = JSON.stringify(folders.map((f) => relative(dir, f)));
  writeFileSync(
    file,
    `[daemon]\nstate_dir = "${join(dir, 'state')}"\nplugins = ${plugins}\n\n[http]\nlisten = "127.0.0.1:0"\n\n${agent}\n[[channels]]\nid = "web"\ntype = "webchat"\n`,
  );
  return { dir, file };
}

/** Sends `text` and returns the text of the reply it gets (the n-th final in this tab). */
async function ask(c: ChatClient, text: string): Promise<string> {
  const before = c.replies().filter((f) => f.final).length;
  c.send(text);
  const finals = await c.finals(before + 1, 15_000);
  return finals[before]!.text!;
}

const toolNames = (body: { tools?: unknown[] }) => (body.tools ?? []).map((t) => (t as { function: { name: string } }).function.name);

describe('plugin folders named in [daemon] plugins', () => {
  const cleanup: Array<() => void | Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });

  it('add a command, a hook, a tool and a mode to a real daemon through config alone', async () => {
    const llm = new FakeLlm();
    await llm.start();
    cleanup.push(() => llm.close());
    const s = setup([join(fixtures, 'shanty')], `[agent]\nprovider = "openai-compatible"\nbase_url = "${llm.url}"\nmodel = "m"\n`);
    cleanup.push(() => rmSync(s.dir, { recursive: true, force: true }));
    const p = new DaemonProcess(s.file);
    cleanup.push(() => void p.child.kill('SIGKILL'));
    const url = await p.url();
    expect(p.lines.find((l) => l.msg === 'channeld started')).toMatchObject({ plugins: ['shanty'] });
    const c = new ChatClient(url, 'tab');
    cleanup.push(() => c.close());
    await c.opened;

    // The command answers and the hook runs, neither reaching the model.
    expect(await ask(c, '/ahoy Ann')).toBe('Ahoy, Ann! (from the shanty plugin)');
    expect(await ask(c, 'ring the bell')).toBe('Ding ding! (the shanty plugin hook)');
    expect(llm.requests).toHaveLength(0);

    // The plugin's tool is offered to the model; the mode's tool and prompt are not, yet.
    expect(await ask(c, 'hello')).toBe('hello');
    expect(toolNames(llm.requests[0]!.body)).toContain('knot_count');
    expect(toolNames(llm.requests[0]!.body)).not.toContain('shanty_verse');
    expect(String(llm.requests[0]!.body.messages[0]!.content)).not.toContain('sea shanty');
    expect(await ask(c, '/sing')).toBe('Unknown command /sing, see /help.');

    // /mode switches the plugin's mode on: its command, tool and prompt come with it.
    expect(await ask(c, '/mode')).toContain('shanty (off)');
    expect(await ask(c, '/mode shanty')).toBe('Mode shanty is on.');
    expect(await ask(c, '/sing')).toBe('What shall we do with a drunken sailor?');
    expect(await ask(c, 'hello again')).toBe('hello again');
    const second = llm.requests[1]!.body;
    expect(toolNames(second)).toEqual(expect.arrayContaining(['knot_count', 'shanty_verse']));
    expect(String(second.messages[0]!.content)).toContain('Answer in the rhythm of a sea shanty.');

    p.signal('SIGTERM');
    expect(await p.exited).toBe(0);
  });

  it('check and start name a missing folder with its line; check lists what is wrong with a bad export', async () => {
    const missing = setup([join(fixtures, 'no-such-plugin')]);
    cleanup.push(() => rmSync(missing.dir, { recursive: true, force: true }));
    const r = await cli(['check', '--config', missing.file]);
    expect(r.code).toBe(78);
    expect(r.stderr).toContain(`daemon.config.toml:3:11: daemon.plugins[0]: plugin folder ${join(fixtures, 'no-such-plugin')} cannot be read (ENOENT)`);

    const p = new DaemonProcess(missing.file);
    cleanup.push(() => void p.child.kill('SIGKILL'));
    expect(await p.exited).toBe(78);
    expect(JSON.stringify(p.lines)).toContain(`daemon.plugins[0]: plugin folder ${join(fixtures, 'no-such-plugin')} cannot be read (ENOENT)`);

    const bad = setup([join(fixtures, 'shanty'), join(fixtures, 'bad-export')]);
    cleanup.push(() => rmSync(bad.dir, { recursive: true, force: true }));
    const b = await cli(['check', '--config', bad.file]);
    expect(b.code).toBe(78);
    const index = join(fixtures, 'bad-export', 'index.mjs');
    expect(b.stderr).toContain(`daemon.plugins[1]: ${index}: unknown key "extras" in the default export`);
    expect(b.stderr).toContain(`daemon.plugins[1]: ${index}: tools[0] ("half_a_tool"): input must be a zod schema or a jsonSchema()`);
    expect(b.stderr).not.toContain('daemon.plugins[0]');

    const ok = setup([join(fixtures, 'shanty')]);
    cleanup.push(() => rmSync(ok.dir, { recursive: true, force: true }));
    const o = await cli(['check', '--config', ok.file]);
    expect(o.code).toBe(0);
    expect(o.stdout).toContain('plugin folders: ../');
  });
});

describe('plugin folders across a reload', () => {
  let d: TestDaemon | undefined;
  afterEach(async () => {
    await d?.stop();
    d = undefined;
  });

  it('a rebuilt agent keeps the plugin additions; a changed plugins list is refused and needs a restart', async () => {
    const shanty = join(fixtures, 'shanty');
    const body = (prompt: string) =>
      `[agent]\nprovider = "echo"\necho_delay_ms = 0\nsystem_prompt = "${prompt}"\n\n[[channels]]\nid = "web"\ntype = "webchat"\n`;
    d = await startDaemon(body('one'), {}, `plugins = ["${shanty}"]`);
    const c = new ChatClient(d.url, 'tab');
    try {
      await c.opened;
      expect(await ask(c, '/ahoy')).toBe('Ahoy, sailor! (from the shanty plugin)');

      // The agent changes: its workspace is rebuilt and gets the plugin's additions again.
      d.rewrite(body('two'));
      expect(await d.daemon.reload()).toMatchObject({ ok: true, agents: ['default'] });
      expect(await ask(c, '/ahoy Bo')).toBe('Ahoy, Bo! (from the shanty plugin)');

      // The folder list changes: refused, nothing applied, the running plugins stay.
      writeFileSync(d.configFile, readFileSync(d.configFile, 'utf8').replace(`plugins = ["${shanty}"]`, 'plugins = []'));
      const refused = await d.daemon.reload();
      expect(refused.ok).toBe(false);
      expect(refused.errors[0]).toContain('[daemon] plugins changed; it takes effect only on a restart');
      expect(await ask(c, '/ahoy')).toBe('Ahoy, sailor! (from the shanty plugin)');
      await waitFor(() => d!.daemon.status().last_reload?.ok === false);
    } finally {
      c.close();
    }
  });
});
