import type { SlashCommand } from '../contracts/commands.js';
import { CodedError } from '../contracts/errors.js';

/** One registry and one dispatch point for slash commands; /help is generated from it. */
export class CommandRegistry {
  readonly #commands = new Map<string, SlashCommand>();
  readonly #names = new Map<string, SlashCommand>();

  register(cmd: SlashCommand): () => void {
    const names = [cmd.name, ...(cmd.aliases ?? [])].map((n) => n.toLowerCase());
    for (const n of names) if (this.#names.has(n)) throw new CodedError('COMMAND_DUPLICATE', `"/${n}" is already registered`);
    this.#commands.set(cmd.name, cmd);
    for (const n of names) this.#names.set(n, cmd);
    return () => {
      this.#commands.delete(cmd.name);
      for (const n of names) this.#names.delete(n);
    };
  }

  find(name: string, modes: ReadonlySet<string> = new Set()): SlashCommand | undefined {
    const cmd = this.#names.get(name.toLowerCase());
    return cmd && (!cmd.mode || modes.has(cmd.mode)) ? cmd : undefined;
  }

  list(modes: ReadonlySet<string> = new Set()): SlashCommand[] {
    return [...this.#commands.values()].filter((c) => !c.mode || modes.has(c.mode));
  }

  /** The /help text, grouped by category. */
  help(modes?: ReadonlySet<string>): string {
    const groups = new Map<string, SlashCommand[]>();
    for (const c of this.list(modes)) groups.set(c.category ?? 'General', [...(groups.get(c.category ?? 'General') ?? []), c]);
    return [...groups].map(([cat, cmds]) => `${cat}:\n${cmds.map((c) => `/${c.name}${c.usage ? ` ${c.usage}` : ''} — ${c.help}`).join('\n')}`).join('\n\n');
  }
}
