import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '../../..');
const doc = readFileSync(join(root, 'docs/EXTENDING.md'), 'utf8');

/** Every `<!-- example: PATH -->` followed by a fenced block. */
function examples(): Array<{ path: string; code: string }> {
  const found: Array<{ path: string; code: string }> = [];
  const re = /<!-- example: (\S+) -->\n```[a-z]*\n([\s\S]*?)\n```/g;
  for (const m of doc.matchAll(re)) found.push({ path: m[1]!, code: m[2]! });
  return found;
}

/**
 * docs/EXTENDING.md's worked examples are the code of fixtures and built-ins that tests
 * run: each block must appear verbatim in the file it names, and each test file the page
 * names must exist and use the example it is listed with.
 */
describe('docs/EXTENDING.md', () => {
  it('has its worked examples', () => {
    expect(examples().length).toBeGreaterThanOrEqual(10);
  });

  for (const { path, code } of examples()) {
    it(`shows ${path} as it is`, () => {
      expect(existsSync(join(root, path))).toBe(true);
      expect(readFileSync(join(root, path), 'utf8')).toContain(code);
    });
  }

  it('names tests that exist and run the examples it lists them with', () => {
    const rows = doc.split('\n').filter((l) => l.startsWith('| a '));
    expect(rows.length).toBe(7);
    for (const row of rows) {
      const cells = row.split('|').map((c) => c.trim());
      const example = /`([^`]+)`/.exec(cells[3]!)![1]!.replace(/\/$/, '');
      const tests = [...cells[4]!.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
      expect(tests.length).toBeGreaterThan(0);
      const anchor = example
        .split('/')
        .at(-1)!
        .replace(/\.(ts|mjs|js)$/, '');
      const mentioned = tests.some((t) => readFileSync(join(root, t), 'utf8').includes(anchor));
      expect(mentioned, `${tests.join(', ')} should use ${example}`).toBe(true);
    }
  });
});
