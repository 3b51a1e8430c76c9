import type { TurnContext } from './turn.js';

/** A slash command; `handler`'s return is the reply. */
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
