import type { SlashCommand } from './commands.js';
import type { Hook } from './hooks.js';
import type { MessageHook } from './message-hooks.js';
import type { AgentMode } from './modes.js';
import type { Tool } from './tools.js';

/**
 * What a plugin folder named in `[daemon] plugins` default-exports from its index
 * (index.js or index.mjs; index.ts where the daemon's Node can load TypeScript). Everything
 * listed is added to every agent's runtime while the daemon runs: modes (switched with
 * `/mode NAME` or `[agent] modes`; what their setup() adds is gated on them), tools, hooks
 * and slash commands, in the same shapes the built-in ones use. `hooks` holds turn hooks and
 * message hooks (`message_received`, `message_sent`) alike.
 */
export interface PluginDefinition {
  /** Letters, digits, "_" and "-"; unique among the configured plugin folders. */
  name: string;
  description?: string;
  modes?: AgentMode[];
  tools?: Tool[];
  hooks?: Array<Hook | MessageHook>;
  commands?: SlashCommand[];
}

/** Declares a plugin folder's definition with its types checked (an identity at run time). */
export function definePluginFolder(definition: PluginDefinition): PluginDefinition {
  return definition;
}
