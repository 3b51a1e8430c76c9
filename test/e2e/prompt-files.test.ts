import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeEach, describe, expect, it } from 'vitest';
import type { FakeLlm } from '../fakes/llm/server.js';
import { withChat, withDaemon, withLlm, withTempDir } from '../helpers/fixtures.js';
import { llmAgent, webchatChannel } from '../helpers/toml.js';

const run = promisify(execFile);
const main = join(import.meta.dirname, '../../dist/bin/channeld.js');

describe('persona and prompt files', () => {
  let llm: FakeLlm;
  let ws: string;
  beforeEach(async () => {
    llm = await withLlm();
    ws = withTempDir('ws');
  });

  it('adds the files after system_prompt, in order; a changed file is read again on reload', async () => {
    writeFileSync(join(ws, 'AGENTS.md'), 'Always answer in French.\n');
    writeFileSync(join(ws, 'SOUL.md'), 'You are a cheerful otter.\n');
    const d = await withDaemon(
      llmAgent(llm.url, 'm', `system_prompt = "Base prompt."\nworkspace_dir = "${ws}"\nprompt_files = ["SOUL.md", "AGENTS.md"]\n`) + webchatChannel(),
    );
    const c = await withChat(d, 'tab');
    c.send('hi');
    await c.finals(1);
    const system = String(llm.requests[0]!.body.messages[0]!.content);
    expect(system.startsWith('Base prompt.\n\n# SOUL.md\n\nYou are a cheerful otter.\n\n# AGENTS.md\n\nAlways answer in French.')).toBe(true);

    writeFileSync(join(ws, 'SOUL.md'), 'You are a grumpy badger.\n');
    const r = (await (await fetch(`${d.url}/reload`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).json()) as {
      ok: boolean;
    };
    expect(r.ok).toBe(true);
    c.send('again');
    await c.finals(2);
    const after = String(llm.requests[1]!.body.messages[0]!.content);
    expect(after).toContain('You are a grumpy badger.');
    expect(after).not.toContain('otter');
  });

  it('a missing prompt file fails check with its path (the default workspace_dir is <state_dir>/agents/<name>)', async () => {
    const file = join(ws, 'daemon.config.toml');
    writeFileSync(
      file,
      `[daemon]\nstate_dir = "${join(ws, 'state')}"\n\n[agents.helper]\nprompt_files = ["AGENTS.md"]\n\n[[channels]]\nid = "web"\ntype = "webchat"\n`,
    );
    const r = await run(process.execPath, [main, 'check', '--config', file], { env: { PATH: process.env.PATH } }).then(
      () => ({ code: 0, stderr: '' }),
      (e: { code: number; stderr: string }) => e,
    );
    expect(r.code).toBe(78);
    expect(r.stderr).toContain(
      `daemon.config.toml:5:16: agents.helper.prompt_files[0]: prompt file ${join(ws, 'state', 'agents', 'helper', 'AGENTS.md')} cannot be read (ENOENT)`,
    );
  });
});
