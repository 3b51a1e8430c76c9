import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { readPromptFiles } from '../../../src/workspace/prompt-files.js';

describe('readPromptFiles', () => {
  const dir = mkdtempSync(join(tmpdir(), 'channeld-pf-'));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('keeps the order and the budget: the file that does not fit is cut, later ones are left out', () => {
    writeFileSync(join(dir, 'A.md'), 'a'.repeat(30));
    writeFileSync(join(dir, 'B.md'), 'b'.repeat(50));
    writeFileSync(join(dir, 'C.md'), 'c'.repeat(10));
    const r = readPromptFiles(dir, ['A.md', 'B.md', 'C.md'], 60);
    expect(r.cut).toEqual(['B.md', 'C.md']);
    expect(r.text).toBe(`# A.md\n\n${'a'.repeat(30)}\n\n# B.md\n\n${'b'.repeat(30)}\n[B.md was cut here: the prompt files are limited to 60 characters]`);
    expect(readPromptFiles(dir, ['C.md', 'A.md'], 60)).toEqual({ text: `# C.md\n\n${'c'.repeat(10)}\n\n# A.md\n\n${'a'.repeat(30)}`, cut: [] });
  });
});
