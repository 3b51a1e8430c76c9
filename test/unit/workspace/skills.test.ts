import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { configWarnings } from '../../../src/cli/check-warnings.js';
import { parseConfig } from '../../../src/config/load.js';
import { parseSkill, scanSkills } from '../../../src/workspace/skills.js';
import { configProblems } from '../../helpers/config.js';
import { withTempDir } from '../../helpers/fixtures.js';
import { kinds } from '../../helpers/kinds.js';

const md = (front: string, body = 'Do the thing.') => `---\n${front}\n---\n\n${body}\n`;
const problemOf = (text: string, folder = 'pdf') => {
  const r = parseSkill(text, folder, 'pdf/SKILL.md');
  return 'problem' in r ? `${r.problem.line}: ${r.problem.message}` : undefined;
};

describe('SKILL.md (the Agent Skills format)', () => {
  it('reads name, description, the optional keys, and ignores keys other agents add', () => {
    const r = parseSkill(
      md(
        'name: pdf\ndescription: >-\n  Fills PDF forms.\n  Use for forms.\nlicense: Apache-2.0\ncompatibility: needs poppler\nallowed-tools: Bash(pdftotext:*) Read\nmetadata:\n  version: 1.2\nuser-invocable: false',
        '# PDF\n\nSteps.',
      ),
      'pdf',
      'pdf/SKILL.md',
    );
    expect(r).toEqual({
      skill: {
        name: 'pdf',
        description: 'Fills PDF forms. Use for forms.',
        license: 'Apache-2.0',
        compatibility: 'needs poppler',
        allowedTools: ['Bash(pdftotext:*)', 'Read'],
        metadata: { version: '1.2' },
        instructions: '# PDF\n\nSteps.',
      },
    });
  });

  it('names the line of what is wrong', () => {
    expect(problemOf('no front matter')).toBe('1: must start with a "---" line opening the YAML front matter (name, description)');
    expect(problemOf('---\nname: pdf\n')).toBe('1: the front matter opened on line 1 is never closed by a "---" line');
    expect(problemOf(md('description: x'))).toBe('2: "name" is missing from the front matter');
    expect(problemOf(md('name: pdf\ndescription: "unclosed'))).toMatch(/^3: front matter is not valid YAML/);
    expect(problemOf(md('name: PDF-Tool\ndescription: x'))).toMatch(/^2: "name" must be lowercase letters, digits and single hyphens/);
    expect(problemOf(md('name: a--b\ndescription: x'), 'a--b')).toMatch(/^2: "name" must be lowercase/);
    expect(problemOf(md(`name: ${'a'.repeat(65)}\ndescription: x`))).toBe('2: "name" has 65 characters; at most 64');
    expect(problemOf(md('description: x\nname: pdfs'))).toBe('3: "name" is "pdfs" but the folder is "pdf"; they must be the same');
    expect(problemOf(md(`name: pdf\nlicense: MIT\ndescription: ${'d'.repeat(1025)}`))).toBe('4: "description" has 1025 characters; at most 1024');
    expect(problemOf(md('name: pdf\ndescription: x\nmetadata: [a]'))).toBe('4: "metadata" must be a mapping of keys to strings');
  });

  it('a folder scan loads the good skills and reports the others; a symlink out of skills_dir is not read', () => {
    const dir = withTempDir('skills-scan');
    const outside = withTempDir('skills-outside');
    for (const [folder, text] of [
      ['good', md('name: good\ndescription: fine')],
      ['bad', md('name: bad')],
    ] as const) {
      mkdirSync(join(dir, folder));
      writeFileSync(join(dir, folder, 'SKILL.md'), text);
    }
    mkdirSync(join(dir, 'notes'));
    writeFileSync(join(outside, 'SKILL.md'), md('name: escape\ndescription: x'));
    symlinkSync(outside, join(dir, 'escape'));
    const scan = scanSkills(dir);
    expect(scan.skills.map((s) => s.name)).toEqual(['good']);
    expect(scan.problems.map((p) => `${p.file.slice(dir.length + 1)}:${p.line}: ${p.message}`)).toEqual([
      'bad/SKILL.md:2: "description" is missing from the front matter',
      `escape/SKILL.md:1: leads outside ${dir} (a symlink?); it was not read`,
      'notes/SKILL.md:1: no SKILL.md in this folder; it is not a skill',
    ]);
  });
});

describe('[agent] skills_dir', () => {
  it('is relative to the config file, and must be a folder (the key and its line are named)', () => {
    const dir = withTempDir('skills-config');
    mkdirSync(join(dir, 'skills'));
    const file = join(dir, 'daemon.config.toml');
    const { config } = parseConfig('[agent]\nskills_dir = "skills"\n', file, kinds, {});
    expect(config.agents.default!.skills_dir).toBe(join(dir, 'skills'));
    // channeld check warns about a SKILL.md the daemon would leave out, at the skills_dir line.
    mkdirSync(join(dir, 'skills/bad'));
    writeFileSync(join(dir, 'skills/bad/SKILL.md'), md('name: bad'));
    const source = '[agent]\nprovider = "echo"\nskills_dir = "skills"\n';
    expect(configWarnings(parseConfig(source, file, kinds, {}), source)).toEqual([
      `daemon.config.toml:3:1: agent.skills_dir: warning: skill left out: ${join(dir, 'skills/bad/SKILL.md')}:2: "description" is missing from the front matter`,
    ]);
    expect(configProblems('[agent]\nprovider = "echo"\nskills_dir = "nope"\n', file)).toEqual([
      `daemon.config.toml:3:14: agent.skills_dir: skills folder ${join(dir, 'nope')} cannot be read (ENOENT)`,
    ]);
  });
});
