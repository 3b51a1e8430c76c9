import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { PLUGIN_IMPORT_TIMEOUT_MS } from '../../src/daemon/plugin-folders.js';
import { DaemonProcess } from '../helpers/process.js';
import { scaled } from '../helpers/timing.js';

const run = promisify(execFile);
const main = join(import.meta.dirname, '../../dist/bin/channeld.js');

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [main, ...args], {
      env: { PATH: process.env.PATH },
      timeout: scaled(30_000) + PLUGIN_IMPORT_TIMEOUT_MS,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

const root = mkdtempSync(join(tmpdir(), 'channeld-plugin-refusals-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;

/** A config whose plugin folders hold the given index.mjs sources. */
function setup(indexes: string[]): string {
  const dir = join(root, `case-${n++}`);
  mkdirSync(dir);
  const folders = indexes.map((src, i) => {
    const folder = join(dir, `p${i}`);
    mkdirSync(folder);
    writeFileSync(join(folder, 'index.mjs'), src);
    return `p${i}`;
  });
  const file = join(dir, 'daemon.config.toml');
  writeFileSync(
    file,
    `[daemon]\nstate_dir = "${join(dir, 'state')}"\nplugins = ${JSON.stringify(folders)}\n\n[http]\nlisten = "127.0.0.1:0"\n\n[agent]\nprovider = "echo"\n\n[[channels]]\nid = "web"\ntype = "webchat"\n`,
  );
  return file;
}

const command = (plugin: string, name: string, aliases: string[] = []) =>
  `export default { name: ${JSON.stringify(plugin)}, commands: [{ name: ${JSON.stringify(name)}, aliases: ${JSON.stringify(aliases)}, help: 'x', handler: () => 'x' }] };\n`;

describe('plugin folders that clash or never load are refused by check and run (exit 78, file:line:col, folder named)', () => {
  it('two folders defining the same command, and a folder defining a built-in command', async () => {
    const twice = setup([command('one', 'hello'), command('two', 'greet', ['HELLO'])]);
    const c1 = await cli(['check', '--config', twice]);
    expect(c1.code).toBe(78);
    expect(c1.stderr).toMatch(
      /daemon\.config\.toml:3:\d+: daemon\.plugins\[1\]: .*p1[/\\]index\.mjs: command "\/hello" is already defined by daemon\.plugins\[0\]/,
    );

    const builtin = setup([command('mine', 'approve')]);
    const c2 = await cli(['check', '--config', builtin]);
    expect(c2.code).toBe(78);
    expect(c2.stderr).toMatch(/daemon\.plugins\[0\]: .*p0[/\\]index\.mjs: command "\/approve" is a built-in command/);

    // `run` refuses the same way, before anything starts.
    const p = new DaemonProcess(builtin);
    expect(await p.exited).toBe(78);
    expect(JSON.stringify(p.lines)).toContain('is a built-in command');
  });

  it('an import that never settles is given up after the bound, naming the folder', async () => {
    const hung = setup(["await new Promise(() => {});\nexport default { name: 'hung' };\n"]);
    const c = await cli(['check', '--config', hung]);
    expect(c.code).toBe(78);
    expect(c.stderr).toMatch(new RegExp(`daemon\\.plugins\\[0\\]: .*p0[/\\\\]index\\.mjs did not finish loading within ${PLUGIN_IMPORT_TIMEOUT_MS} ms`));
  });
});
