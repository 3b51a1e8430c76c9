import type { ChannelMessage } from './message.js';
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

/** What every command starts with: a slash after any white space (what `trim` takes off). */
const MAYBE_COMMAND = /^\s*\//;

/** Each message's parse, made once: the dispatcher reads it for the controls, the runtime for the turn. */
const parsed = new WeakMap<ChannelMessage, { botName: string | undefined; command: ParsedCommand | undefined }>();

/**
 * The message's command, parsed once per message object and bot name (the dispatcher and the
 * runtime both ask; a message read back from the inbox is parsed again, once).
 */
export function commandOf(msg: ChannelMessage, botName?: string): ParsedCommand | undefined {
  // Most messages are not commands. Those are answered by one anchored test, without the
  // parse's trim and capture, and without an entry here: each entry is an ephemeron that the
  // collector traces while the message lives, for a thousand turns at once under a burst.
  if (!MAYBE_COMMAND.test(msg.text)) return undefined;
  const known = parsed.get(msg);
  if (known && known.botName === botName) return known.command;
  const command = parseCommand(msg.text, botName);
  parsed.set(msg, { botName, command });
  return command;
}
