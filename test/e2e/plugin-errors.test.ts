import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/daemon.js';
import { withChat, withDaemon } from '../helpers/fixtures.js';
import { echoAgent, webchatChannel } from '../helpers/toml.js';

const folder = mkdtempSync(join(tmpdir(), 'channeld-plugin-errors-'));
afterAll(() => rmSync(folder, { recursive: true, force: true }));

describe("a plugin's hook or command that throws is logged with where it came from and counted", () => {
  it('one error line naming the plugin, the command or hook, its phase and the scrubbed exception; a metric by plugin and kind', async () => {
    mkdirSync(join(folder, 'faulty'));
    writeFileSync(
      join(folder, 'faulty', 'index.mjs'),
      `export default {
  name: 'faulty',
  commands: [{ name: 'explode', help: 'throws', handler: () => { throw new Error('command broke with token xoxb-1234567890-abcdefghijkl'); } }],
  hooks: [{ name: 'tripwire', phase: 'pre_execute', run: (ctx) => { if (ctx.message.text === 'trip') throw new Error('hook broke'); } }],
};\n`,
    );
    const d = await withDaemon(echoAgent(0) + webchatChannel(), {}, `plugins = ${JSON.stringify([join(folder, 'faulty')])}`);
    const c = await withChat(d, 'tab-1');
    c.send('/explode', 'm1');
    expect((await c.finals(1, 15_000))[0]!.text).toMatch(/went wrong/i);
    c.send('trip', 'm2');
    await c.finals(2, 15_000);

    const lines = d.logs.text
      .split('\n')
      .filter((l) => l.includes('"plugin":"faulty"'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const command = lines.find((l) => l.kind === 'command')!;
    expect(command).toMatchObject({ level: 50, plugin: 'faulty', name: 'explode', phase: 'command' });
    expect(String(command.msg)).toContain('plugin faulty: command explode threw in command: command broke');
    expect(JSON.stringify(command)).not.toContain('xoxb-1234567890-abcdefghijkl');
    expect(lines.find((l) => l.kind === 'hook')).toMatchObject({ level: 50, plugin: 'faulty', name: 'tripwire', phase: 'pre_execute' });
    const metrics = await waitFor(async () => {
      const text = await (await fetch(`${d.url}/metrics`)).text();
      return text.includes('channeld_plugin_errors_total{plugin="faulty",kind="hook"} 1') ? text : undefined;
    });
    expect(metrics).toContain('channeld_plugin_errors_total{plugin="faulty",kind="command"} 1');
  });
});
