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

  /**
   * The system prompt; a promise only from the first contributor that answers with one (most
   * answer at once, and an await each was a promise and a microtask per contributor per turn).
   */
  build(ctx: TurnContext): string | Promise<string> {
    return this.#from(ctx, 0, []);
  }

  #from(ctx: TurnContext, from: number, parts: string[]): string | Promise<string> {
    const all = this.#contributors;
    for (let i = from; i < all.length; i++) {
      const c = all[i]!;
      if (c.mode && !ctx.modes.has(c.mode)) continue;
      let text: string | undefined | Promise<string | undefined>;
      try {
        text = c.contribute(ctx);
      } catch (err) {
        this.onError(c.name, err);
        continue;
      }
      if (text instanceof Promise) {
        return text.then(
          (t) => this.#from(ctx, i + 1, add(parts, t)),
          (err: unknown) => {
            this.onError(c.name, err);
            return this.#from(ctx, i + 1, parts);
          },
        );
      }
      add(parts, text);
    }
    return parts.join('\n\n');
  }
}

function add(parts: string[], text: string | undefined): string[] {
  if (text?.trim()) parts.push(text.trim());
  return parts;
}
