import { cpSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { say } from '../helpers/approval.js';
import { waitFor } from '../helpers/daemon.js';
import { withLlm, withTempDir } from '../helpers/fixtures.js';
import { withDaemonProcess, writeProcessConfig } from '../helpers/process.js';
import { llmAgent, webchatChannel } from '../helpers/toml.js';
import { ChatClient } from '../helpers/webchat-client.js';

/** The built daemon: skills_dir relative to the config file, re-read on a real SIGHUP. */
describe('skills in a daemon process', () => {
  it('reads skills_dir next to the config file and again on SIGHUP; a broken SKILL.md is a warning with its file and line', async () => {
    const llm = await withLlm();
    const dir = withTempDir('skills-process');
    cpSync(join(import.meta.dirname, '../fixtures/skills/tides'), join(dir, 'skills/tides'), { recursive: true });
    const file = writeProcessConfig(dir, llmAgent(llm.url, 'm', 'skills_dir = "skills"') + webchatChannel());
    const p = withDaemonProcess(file);
    const c = new ChatClient(await p.url(), 'tab');
    try {
      await c.opened;
      const system = (n: number) => String(llm.requests[n]!.body.messages.find((m) => m.role === 'system')?.content);
      llm.script(say('one'), say('two'));
      c.send('first');
      await c.finals(1, 20_000);
      expect(system(0)).toContain('- tides: Reads tide tables for harbours.');

      mkdirSync(join(dir, 'skills/charts'));
      writeFileSync(join(dir, 'skills/charts/SKILL.md'), '---\nname: charts\ndescription: Reads sea charts.\n---\nLook at the chart.\n');
      mkdirSync(join(dir, 'skills/broken'));
      writeFileSync(join(dir, 'skills/broken/SKILL.md'), '---\nname: broken\ndescription: [unclosed\n---\n');
      p.signal('SIGHUP');
      await waitFor(() => p.lines.some((l) => l.msg === 'config reloaded'), 15_000);
      const warning = p.lines.find((l) => l.code === 'SKILL_INVALID');
      expect(String(warning?.msg)).toContain(`${join(dir, 'skills/broken/SKILL.md')}:3: front matter is not valid YAML`);
      c.send('second');
      await c.finals(2, 20_000);
      expect(system(1)).toContain('- charts: Reads sea charts.');
      expect(system(1)).toContain('- tides:');
      expect(system(1)).not.toContain('broken');
    } finally {
      c.close();
    }
  });
});
