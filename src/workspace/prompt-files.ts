import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { CodedError } from '../contracts/errors.js';
import type { Runtime } from '../runtime/runtime.js';
import { realPathInside } from '../util/inside-dir.js';

/** The most characters all prompt files together add to the system prompt. */
export const PROMPT_FILES_BUDGET_CHARS = 32_000;

export interface PromptFilesResult {
  /** The sections, in `prompt_files` order, each headed by its file name. */
  text: string;
  /** Files cut short or left out because the budget ran out. */
  cut: string[];
}

/**
 * Reads the agent's prompt files in order, within `budgetChars`: a file that does not fit
 * whole is cut at the budget with a note, and the files after it are left out.
 */
export function readPromptFiles(dir: string, files: readonly string[], budgetChars = PROMPT_FILES_BUDGET_CHARS): PromptFilesResult {
  const sections: string[] = [];
  const cut: string[] = [];
  let left = budgetChars;
  for (const f of files) {
    if (left <= 0) {
      cut.push(f);
      continue;
    }
    const real = realPathInside(dir, f);
    if (real === undefined) throw new CodedError('PROMPT_FILE_OUTSIDE', `prompt file ${f} leads outside ${resolve(dir)} (a symlink?); it was not read`);
    const body = readFileSync(real, 'utf8').trim();
    if (!body) continue;
    if (body.length > left) {
      sections.push(`# ${f}\n\n${body.slice(0, left)}\n[${f} was cut here: the prompt files are limited to ${budgetChars} characters]`);
      cut.push(f);
      left = 0;
      continue;
    }
    sections.push(`# ${f}\n\n${body}`);
    left -= body.length;
  }
  return { text: sections.join('\n\n'), cut };
}

/**
 * The prompt files as a contributor right after `system_prompt`. The files are read when the
 * workspace is built and again by `reload()` (the daemon calls it on every config reload),
 * not on every turn.
 */
export class PromptFiles {
  #current: PromptFilesResult = { text: '', cut: [] };

  constructor(
    private readonly dir: string,
    private readonly files: () => readonly string[],
    private readonly onCut: (files: string[]) => void = () => {},
  ) {}

  register(runtime: Runtime): void {
    this.reload();
    runtime.prompt.register({ name: 'prompt_files', priority: 1, contribute: () => this.#current.text || undefined });
  }

  /** Reads the files again; a file that cannot be read leaves the previous text in place and throws. */
  reload(): void {
    this.#current = readPromptFiles(this.dir, this.files());
    if (this.#current.cut.length) this.onCut(this.#current.cut);
  }
}
