import { CodedError } from '../errors.js';
import type { TurnContext } from './context.js';

export interface SlashCommand {
  name: string;
  aliases?: string[];
  category?: string;
  /** One line for /help; `usage` shows arguments. */
  help: string;
  usage?: string;
  /** Runs only while this mode is active. */
  mode?: string;
  handler(ctx: TurnContext, args: string): string | Promise<string>;
}

export interface ParsedCommand {
  name: string;
  args: string;
}

/** `/name@bot args` → {name, args}; undefined when the text is not a command for this bot. */
export function parseCommand(text: string, botName?: string): ParsedCommand | undefined {
  const m = /^\/([A-Za-z0-9_]+)(?:@([A-Za-z0-9_]+))?(?:\s+([\s\S]*))?$/.exec(text.trim());
  if (!m) return undefined;
  if (m[2] && (!botName || m[2].toLowerCase() !== botName.toLowerCase())) return undefined;
  return { name: m[1]!.toLowerCase(), args: (m[3] ?? '').trim() };
}

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
    return [...groups]
      .map(([cat, cmds]) => `${cat}:\n${cmds.map((c) => `/${c.name}${c.usage ? ` ${c.usage}` : ''} — ${c.help}`).join('\n')}`)
      .join('\n\n');
  }
}
