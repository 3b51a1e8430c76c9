import { readdirSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type * as Yaml from 'yaml';
import { realPathInside } from '../util/inside-dir.js';

/**
 * The YAML parser, loaded the first time a SKILL.md is read. It is a third of the bundle's
 * main chunk (268 KB), and every start read and linked it, with or without skills_dir.
 * scripts/bundle.mjs leaves the package out of the bundle, so this is its only load.
 */
let yaml: typeof Yaml | undefined;
const loadYaml = (): typeof Yaml => (yaml ??= createRequire(import.meta.url)('yaml') as typeof Yaml);

/**
 * Agent Skills folders (the public format of agentskills.io, which Claude and other agents
 * read): `<skills_dir>/<name>/SKILL.md` with YAML front matter, then markdown instructions,
 * and any other files the instructions name. A skill written for another agent works here
 * unchanged: keys this daemon does not use are ignored, not refused.
 */

/** The most skill folders read from one skills_dir; the rest are left out with a warning. */
export const MAX_SKILLS = 256;
/** A SKILL.md larger than this is not read (the format recommends under 500 lines). */
export const MAX_SKILL_FILE_BYTES = 256 * 1024;
const NAME = /^[a-z0-9]+(-[a-z0-9]+)*$/;
const MAX_NAME_CHARS = 64;
const MAX_DESCRIPTION_CHARS = 1024;
const MAX_COMPATIBILITY_CHARS = 500;

export interface Skill {
  /** Lowercase letters, digits and single hyphens, at most 64 characters; the folder's name. */
  name: string;
  /** What the skill does and when to use it (at most 1024 characters): what the model chooses by. */
  description: string;
  license?: string;
  compatibility?: string;
  /** `allowed-tools`: tools the skill expects to use (the format's experimental key; listed to the model, not enforced). */
  allowedTools: string[];
  metadata: Record<string, string>;
  /** The folder (real path, inside skills_dir). */
  dir: string;
  /** The markdown after the front matter. */
  instructions: string;
}

/** Why a SKILL.md (or a folder) was left out: the file, the line (1-based) and what is wrong. */
export interface SkillProblem {
  file: string;
  line: number;
  message: string;
}

export interface SkillScan {
  skills: Skill[];
  problems: SkillProblem[];
}

/** `file:line: message`, the way the warning reads. */
export const problemText = (p: SkillProblem): string => `${p.file}:${p.line}: ${p.message}`;

/**
 * Reads every skill folder of `dir`, in name order. A folder whose SKILL.md is missing or
 * invalid is reported and left out; the others still load. Hidden folders are skipped.
 */
export function scanSkills(dir: string): SkillScan {
  const out: SkillScan = { skills: [], problems: [] };
  const folders = readdirSync(dir, { withFileTypes: true })
    .filter((e) => !e.name.startsWith('.') && (e.isDirectory() || e.isSymbolicLink()))
    .map((e) => e.name)
    .sort();
  if (folders.length > MAX_SKILLS)
    out.problems.push({ file: dir, line: 1, message: `${folders.length} skill folders; only the first ${MAX_SKILLS} (by name) are read` });
  for (const folder of folders.slice(0, MAX_SKILLS)) {
    const file = join(dir, folder, 'SKILL.md');
    let real: string | undefined;
    try {
      real = realPathInside(dir, join(folder, 'SKILL.md'));
    } catch {
      // A plain folder (notes, a shared scripts folder) is not a skill: said once, not an error.
      out.problems.push({ file, line: 1, message: 'no SKILL.md in this folder; it is not a skill' });
      continue;
    }
    if (real === undefined) {
      out.problems.push({ file, line: 1, message: `leads outside ${dir} (a symlink?); it was not read` });
      continue;
    }
    const size = statSync(real).size;
    if (size > MAX_SKILL_FILE_BYTES) {
      out.problems.push({ file, line: 1, message: `is ${size} bytes; a SKILL.md may have at most ${MAX_SKILL_FILE_BYTES}` });
      continue;
    }
    const parsed = parseSkill(readFileSync(real, 'utf8'), folder, file);
    if ('problem' in parsed) out.problems.push(parsed.problem);
    else out.skills.push({ ...parsed.skill, dir: join(real, '..') });
  }
  return out;
}

/** One SKILL.md's text: the skill, or the first problem with its line. `folder` is the folder's name. */
export function parseSkill(text: string, folder: string, file: string): { skill: Omit<Skill, 'dir'> } | { problem: SkillProblem } {
  const problem = (line: number, message: string) => ({ problem: { file, line, message } });
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/);
  if (lines[0]?.trim() !== '---') return problem(1, 'must start with a "---" line opening the YAML front matter (name, description)');
  const close = lines.findIndex((l, i) => i > 0 && l.trim() === '---');
  if (close < 0) return problem(1, 'the front matter opened on line 1 is never closed by a "---" line');
  const { isMap, isScalar, LineCounter, parseDocument } = loadYaml();
  const counter = new LineCounter();
  const doc = parseDocument(lines.slice(1, close).join('\n'), { lineCounter: counter, prettyErrors: false, uniqueKeys: true });
  // Front matter lines are counted from the file's line 2.
  const lineAt = (offset: number | undefined) => (offset === undefined ? 1 : counter.linePos(offset).line + 1);
  const error = doc.errors[0];
  if (error) return problem(lineAt(error.pos[0]), `front matter is not valid YAML: ${error.message.split('\n')[0]}`);
  if (!isMap(doc.contents)) return problem(2, 'the front matter must be a YAML mapping of keys (name, description, …)');
  const lineOf = (key: string) => {
    const pair = (doc.contents as { items: Array<{ key: unknown }> }).items.find((p) => isScalar(p.key) && p.key.value === key);
    return lineAt(pair && isScalar(pair.key) ? pair.key.range?.[0] : undefined);
  };
  const fm = doc.toJS() as Record<string, unknown>;
  const str = (key: string, max: number, required: boolean): string | { problem: SkillProblem } | undefined => {
    const v = fm[key];
    if (v === undefined || v === null) return required ? problem(2, `"${key}" is missing from the front matter`) : undefined;
    if (typeof v !== 'string' || (required && !v.trim())) return problem(lineOf(key), `"${key}" must be ${required ? 'a non-empty' : 'a'} string`);
    if (v.length > max) return problem(lineOf(key), `"${key}" has ${v.length} characters; at most ${max}`);
    return v.trim();
  };
  const name = str('name', MAX_NAME_CHARS, true);
  if (typeof name !== 'string') return name!;
  if (!NAME.test(name))
    return problem(lineOf('name'), `"name" must be lowercase letters, digits and single hyphens, not starting or ending with one (got "${name}")`);
  if (name !== folder) return problem(lineOf('name'), `"name" is "${name}" but the folder is "${folder}"; they must be the same`);
  const description = str('description', MAX_DESCRIPTION_CHARS, true);
  if (typeof description !== 'string') return description!;
  const license = str('license', Number.MAX_SAFE_INTEGER, false);
  if (typeof license === 'object') return license;
  const compatibility = str('compatibility', MAX_COMPATIBILITY_CHARS, false);
  if (typeof compatibility === 'object') return compatibility;
  const tools = fm['allowed-tools'];
  // The format writes a space-separated string; some agents write a YAML list: both are read.
  const allowedTools =
    typeof tools === 'string' ? tools.split(/\s+/).filter(Boolean) : Array.isArray(tools) && tools.every((t) => typeof t === 'string') ? tools : [];
  if (tools !== undefined && tools !== null && !allowedTools.length && !(typeof tools === 'string' && !tools.trim()))
    return problem(lineOf('allowed-tools'), '"allowed-tools" must be a space-separated string of tool names');
  const meta = fm.metadata;
  if (meta !== undefined && meta !== null && (typeof meta !== 'object' || Array.isArray(meta)))
    return problem(lineOf('metadata'), '"metadata" must be a mapping of keys to strings');
  const metadata = Object.fromEntries(Object.entries((meta ?? {}) as Record<string, unknown>).map(([k, v]) => [k, String(v)]));
  return {
    skill: {
      name,
      description,
      ...(license ? { license } : {}),
      ...(compatibility ? { compatibility } : {}),
      allowedTools,
      metadata,
      instructions: lines
        .slice(close + 1)
        .join('\n')
        .trim(),
    },
  };
}
