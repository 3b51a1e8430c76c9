import type { PromptContributor } from '../contracts/modes.js';
import type { TurnContext } from '../contracts/turn.js';

/** Adds a section to the system prompt; lower priority comes first. */
/** Assembles the system prompt from contributors; one that throws is reported and skipped. */
export class PromptManager {
  readonly #contributors: PromptContributor[] = [];

  constructor(private readonly onError: (name: string, err: unknown) => void = () => {}) {}

  register(c: PromptContributor): () => void {
    this.#contributors.push(c);
    this.#contributors.sort((a, b) => (a.priority ?? 100) - (b.priority ?? 100) || a.name.localeCompare(b.name));
    return () => void this.#contributors.splice(this.#contributors.indexOf(c) >>> 0, 1);
  }

  async build(ctx: TurnContext): Promise<string> {
    const parts: string[] = [];
    for (const c of this.#contributors) {
      if (c.mode && !ctx.modes.has(c.mode)) continue;
      try {
        const text = await c.contribute(ctx);
        if (text?.trim()) parts.push(text.trim());
      } catch (err) {
        this.onError(c.name, err);
      }
    }
    return parts.join('\n\n');
  }
}
