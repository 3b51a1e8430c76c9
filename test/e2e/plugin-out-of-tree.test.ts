import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { FakeLlm } from '../fakes/llm/server.js';
import { withDaemonProcess } from '../helpers/process.js';
import { scaled } from '../helpers/timing.js';
import { ChatClient } from '../helpers/webchat-client.js';

const repo = join(import.meta.dirname, '../..');
/** The entry `npm start` and the systemd unit run: the bundled daemon. */
const bundle = join(repo, 'dist/bundle/channeld.js');

/**
 * A plugin folder as a user writes it, outside the repo: its own package.json depending on
 * channeld, installed the way `npm install` installs a `file:` dependency (a symlink in its
 * node_modules), and no zod of its own: everything comes from `channeld/plugin`.
 */
function writePluginFolder(dir: string): string {
  const folder = join(dir, 'harbour-plugin');
  mkdirSync(join(folder, 'node_modules'), { recursive: true });
  writeFileSync(
    join(folder, 'package.json'),
    JSON.stringify({ name: 'harbour-plugin', private: true, type: 'module', dependencies: { channeld: `file:${repo}` } }),
  );
  symlinkSync(repo, join(folder, 'node_modules', 'channeld'), 'dir');
  writeFileSync(
    join(folder, 'index.js'),
    `import { definePluginFolder, z } from 'channeld/plugin';

export default definePluginFolder({
  name: 'harbour',
  commands: [{ name: 'tide', usage: '[PORT]', help: 'the tide in a harbour', handler: (_ctx, args) => \`High tide at \${args || 'Dover'}\` }],
  tools: [{ name: 'berth_count', description: 'free berths in a harbour', input: z.object({ harbour: z.string() }), run: ({ harbour }) => \`\${harbour}: 3 berths\` }],
});
`,
  );
  return folder;
}

describe('a plugin folder outside the repo', () => {
  const cleanup: Array<() => void | Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });

  it('imports channeld/plugin from its own package and its command answers in chat', async () => {
    const llm = new FakeLlm();
    await llm.start();
    cleanup.push(() => llm.close());
    const dir = mkdtempSync(join(tmpdir(), 'channeld-oot-plugin-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const folder = writePluginFolder(dir);
    const file = join(dir, 'daemon.config.toml');
    writeFileSync(
      file,
      `[daemon]\nstate_dir = "${join(dir, 'state')}"\nplugins = [${JSON.stringify(folder)}]\n\n[http]\nlisten = "127.0.0.1:0"\n\n` +
        `[agent]\nprovider = "openai-compatible"\nbase_url = "${llm.url}"\nmodel = "m"\n\n[[channels]]\nid = "web"\ntype = "webchat"\n`,
    );
    const p = withDaemonProcess(file, {}, [], bundle);
    const url = await p.url();
    expect(p.lines.find((l) => l.msg === 'channeld started')).toMatchObject({ plugins: ['harbour'] });
    const c = new ChatClient(url, 'tab');
    cleanup.push(() => c.close());
    await c.opened;

    c.send('/tide Hull');
    const [reply] = await c.finals(1, 15_000);
    expect(reply!.text).toBe('High tide at Hull');

    // Its tool, with a schema built by the daemon's zod, is offered to the model.
    c.send('hello');
    await c.finals(2, 15_000);
    const tool = (llm.requests[0]!.body.tools ?? [])
      .map((t) => (t as { function: { name: string; parameters: unknown } }).function)
      .find((f) => f.name === 'berth_count');
    expect(tool?.parameters).toMatchObject({ type: 'object', properties: { harbour: { type: 'string' } } });
  });

  it("type-checks against channeld/plugin's published declarations", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'channeld-oot-types-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const folder = writePluginFolder(dir);
    writeFileSync(
      join(folder, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext', target: 'es2023', strict: true, noEmit: true, skipLibCheck: true, types: [] },
        files: ['index.ts'],
      }),
    );
    const tsc = (name: string) => {
      writeFileSync(
        join(folder, 'index.ts'),
        `import { definePluginFolder, z, type SlashCommand } from 'channeld/plugin';\n` +
          `const tide: SlashCommand = { name: 'tide', help: 'the tide', handler: (_ctx, args) => \`High tide at \${args}\` };\n` +
          `export default definePluginFolder({ name: ${name}, commands: [tide], tools: [{ name: 'b', description: 'd', input: z.object({ h: z.string() }), run: ({ h }) => h }] });\n`,
      );
      return promisify(execFile)(process.execPath, [join(repo, 'node_modules/typescript/bin/tsc'), '-p', folder], { timeout: scaled(60_000) });
    };
    await tsc("'harbour'");
    // The declarations are really applied: a wrong definition is refused.
    await expect(tsc('7')).rejects.toMatchObject({ stdout: expect.stringContaining("TS2322: Type 'number' is not assignable to type 'string'") });
  });
});
