import { readFileSync, statSync } from 'node:fs';
import { z } from 'zod';
import { CodedError } from '../contracts/errors.js';
import type { Tool } from '../contracts/tools.js';
import type { Runtime } from '../runtime/runtime.js';
import type { TurnContext } from '../contracts/turn.js';
import { cutText } from '../util/cut-text.js';
import { realPathInside } from '../util/inside-dir.js';
import { problemText, scanSkills, type Skill, type SkillProblem } from './skills.js';

/** The most skills listed to the model; the rest are named by count only. */
export const MAX_LISTED_SKILLS = 64;
/** The most characters the skills list adds to the system prompt. */
export const MAX_SKILL_LIST_CHARS = 8000;
/** The most characters `load_skill` returns: a skill's instructions, or one of its files. */
export const MAX_SKILL_LOAD_CHARS = 32_000;
/** A file of a skill larger than this is not read at all. */
const MAX_SKILL_FILE_READ_BYTES = 1024 * 1024;

export const LOAD_SKILL = 'load_skill';
/** Where a turn keeps its set of loaded skills (ctx.extras). */
const LOADED = 'skills.loaded';

/**
 * An agent's skills: the list offered in the system prompt, the `load_skill` tool, and which
 * skills are loaded. "Loaded" lasts one turn: a skill's instructions reach the model as the
 * tool's result, which is not kept in the conversation's history, so in the next turn the
 * model no longer has them and loads the skill again (the list is in every system prompt).
 * Tools with `requires_skills` are offered from the model step after the load, within the turn.
 */
export class Skills {
  #skills = new Map<string, Skill>();
  /** Skills loaded per conversation scope during its running turn (a scope runs one turn at a time). */
  readonly #loaded = new Map<string, Set<string>>();

  constructor(
    private readonly dir: string,
    private readonly onProblem: (p: SkillProblem, text: string) => void,
    /** The agent's `tools` allowlist: without load_skill in it, no list is offered. */
    private readonly allow: () => readonly string[] | undefined = () => undefined,
  ) {}

  /** Reads skills_dir again (config reload); a folder that vanished or broke is dropped, the rest stay. */
  reload(): void {
    const scan = scanSkills(this.dir);
    for (const p of scan.problems) this.onProblem(p, problemText(p));
    this.#skills = new Map(scan.skills.map((s) => [s.name, s]));
  }

  get names(): ReadonlySet<string> {
    return new Set(this.#skills.keys());
  }

  /** A turn starts: nothing is loaded yet. Returns the live set the turn's tool steps read. */
  turnStarts(ctx: TurnContext): ReadonlySet<string> {
    const loaded = new Set<string>();
    this.#loaded.set(ctx.scope, loaded);
    ctx.extras.set(LOADED, loaded);
    return loaded;
  }

  register(runtime: Runtime): void {
    this.reload();
    runtime.prompt.register({ name: 'skills', priority: 50, contribute: () => this.#list() });
    runtime.tools.register(this.#tool());
    // The turn's set goes with it, unless a newer turn of the scope (an interrupt) has its own already.
    runtime.hooks.register({
      phase: 'finally',
      name: 'skills_loaded_end',
      run: (ctx) => {
        if (this.#loaded.get(ctx.scope) === ctx.extras.get(LOADED)) this.#loaded.delete(ctx.scope);
      },
    });
  }

  #list(): string | undefined {
    const allow = this.allow();
    if (!this.#skills.size || (allow !== undefined && !allow.includes(LOAD_SKILL))) return undefined;
    const head = `# Skills\n\nThese skills hold instructions for particular tasks. When a task matches one, call ${LOAD_SKILL} with its name first and follow what it returns; it may name files of the skill, which ${LOAD_SKILL} reads too (give "file").`;
    let text = head;
    let listed = 0;
    for (const s of this.#skills.values()) {
      const line = `\n- ${s.name}: ${s.description.replace(/\s+/g, ' ')}`;
      if (listed >= MAX_LISTED_SKILLS || text.length + line.length > MAX_SKILL_LIST_CHARS) break;
      text += line;
      listed++;
    }
    if (listed < this.#skills.size) text += `\n(${this.#skills.size - listed} more skills are not listed here.)`;
    return text;
  }

  #tool(): Tool<{ name: string; file?: string | undefined }> {
    return {
      name: LOAD_SKILL,
      description: "Loads a skill: returns its instructions, or with `file` one of the skill's own files (a path inside its folder, e.g. references/guide.md).",
      input: z.object({
        name: z.string().max(64).describe('the skill, as listed under Skills in the system prompt'),
        file: z.string().max(1024).optional().describe("a file inside the skill's folder; omit for the instructions"),
      }),
      run: ({ name, file }, ctx) => {
        const skill = this.#skills.get(name);
        if (!skill) throw new CodedError('SKILL_NOT_FOUND', `there is no skill "${name}"; the skills are: ${[...this.#skills.keys()].join(', ') || 'none'}`);
        const text = file === undefined ? this.#instructions(skill) : readSkillFile(skill, file);
        this.#loaded.get(ctx.scope)?.add(name);
        return cutText(text, MAX_SKILL_LOAD_CHARS);
      },
    };
  }

  #instructions(s: Skill): string {
    const tools = s.allowedTools.length ? `\n\n(This skill expects the tools: ${s.allowedTools.join(', ')}.)` : '';
    return `# Skill: ${s.name}\n\n${s.instructions}${tools}`;
  }
}

/** A file of the skill's folder, never one outside it (`..`, an absolute path, a symlink out). */
function readSkillFile(skill: Skill, file: string): string {
  let real: string | undefined;
  try {
    real = realPathInside(skill.dir, file);
  } catch {
    throw new CodedError('SKILL_FILE_NOT_FOUND', `skill "${skill.name}" has no file "${file}"`);
  }
  if (real === undefined)
    throw new CodedError('SKILL_FILE_OUTSIDE', `"${file}" is outside the folder of skill "${skill.name}"; only its own files can be read`);
  const st = statSync(real);
  if (!st.isFile()) throw new CodedError('SKILL_FILE_NOT_FOUND', `"${file}" in skill "${skill.name}" is not a file`);
  if (st.size > MAX_SKILL_FILE_READ_BYTES)
    throw new CodedError('SKILL_FILE_TOO_LARGE', `"${file}" in skill "${skill.name}" is ${st.size} bytes; at most ${MAX_SKILL_FILE_READ_BYTES} are read`);
  return readFileSync(real, 'utf8');
}
