import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CodedError } from '../../../src/contracts/errors.js';
import { readPromptFiles } from '../../../src/workspace/prompt-files.js';
import { configProblems } from '../../helpers/config.js';

describe('a prompt file reached through a symlink that leaves workspace_dir', () => {
  const root = mkdtempSync(join(tmpdir(), 'channeld-pf-link-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  const ws = join(root, 'ws');
  mkdirSync(join(ws, 'sub'), { recursive: true });
  writeFileSync(join(root, 'secret.txt'), 'the host secret');
  writeFileSync(join(ws, 'sub', 'inside.md'), 'inside text');
  symlinkSync(join(root, 'secret.txt'), join(ws, 'SOUL.md'));
  symlinkSync(join(ws, 'sub', 'inside.md'), join(ws, 'ok.md'));

  it('is refused when read, while a link that stays inside is read', () => {
    expect(readPromptFiles(ws, ['ok.md']).text).toContain('inside text');
    let thrown: unknown;
    try {
      readPromptFiles(ws, ['SOUL.md']);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(CodedError);
    expect((thrown as CodedError).code).toBe('PROMPT_FILE_OUTSIDE');
  });

  it('is refused by check with its line', () => {
    const web = '[[channels]]\nid = "web"\ntype = "webchat"\n';
    expect(configProblems(`[agent]\nworkspace_dir = "${ws}"\nprompt_files = ["ok.md", "SOUL.md"]\n${web}`)).toEqual([
      expect.stringMatching(/^daemon\.config\.toml:3:\d+: agent\.prompt_files\[1\]: "SOUL\.md" leads outside the agent's workspace_dir .* through a symlink$/),
    ]);
  });
});
