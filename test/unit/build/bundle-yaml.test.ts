import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { withTempDir } from '../../helpers/fixtures.js';
import { bundleChunks, bundleDir, chunkText } from '../../helpers/bundle.js';
import { scaled } from '../../helpers/timing.js';

/**
 * The YAML parser is needed only to read a SKILL.md, and it was a third of the bundle's main
 * chunk (268 KB) that every start read and linked. scripts/bundle.mjs leaves it out and
 * src/workspace/skills.ts loads it from its package the first time a SKILL.md is read. Checked
 * on the chunks the last `npm run build` wrote, and by running that bundle's `check`.
 */
describe("the bundle's YAML parser", () => {
  it('is not in any chunk', () => {
    const texts = bundleChunks().map((f) => ({ f, text: chunkText(f) }));
    // The markers this looks for are there for the packages that are bundled.
    expect(texts.some(({ text }) => /^\/\/ node_modules\/zod\//m.test(text))).toBe(true);
    expect(texts.filter(({ text }) => /^\/\/ node_modules\/yaml\//m.test(text)).map(({ f }) => f)).toEqual([]);
  });

  it('is loaded when a SKILL.md is read: the bundle reports what is wrong in its front matter, with its line', () => {
    const dir = withTempDir('bundle-yaml');
    mkdirSync(join(dir, 'skills/tides'), { recursive: true });
    writeFileSync(join(dir, 'skills/tides/SKILL.md'), '---\nname: tides\ndescription: Reads tide tables.\n---\nRead the table.\n');
    mkdirSync(join(dir, 'skills/broken'));
    writeFileSync(join(dir, 'skills/broken/SKILL.md'), '---\nname: broken\ndescription: [unclosed\n---\n');
    const file = join(dir, 'daemon.config.toml');
    writeFileSync(file, `[daemon]\nstate_dir = "${join(dir, 'state')}"\n[agent]\nprovider = "echo"\nskills_dir = "skills"\n`);
    const r = spawnSync(process.execPath, [join(bundleDir, 'channeld.js'), 'check', '--config', file], {
      encoding: 'utf8',
      timeout: scaled(30_000),
      env: { PATH: process.env.PATH },
    });
    const out = r.stdout + r.stderr;
    expect(r.error, out).toBeUndefined();
    expect(out).toContain(`skill left out: ${join(dir, 'skills/broken/SKILL.md')}:3: front matter is not valid YAML`);
    expect(out).not.toContain('skills/tides');
    expect(r.status).toBe(0);
  });
});
