import type { SlashCommand } from './commands.js';
import type { Hook } from './hooks.js';
import type { MessageHook } from './message-hooks.js';
import type { AgentMode, ModeApi } from './modes.js';
import type { Tool } from './tools.js';

/** The default time one call of a plugin folder's tool may take (as an MCP server's `timeout_ms`). */
export const PLUGIN_TOOL_TIMEOUT_MS = 60_000;
/** The longest `timeout_ms` a plugin tool may declare: a day, like every duration in the config (Node runs a timer of 2^31 ms or more at once). */
export const PLUGIN_TOOL_MAX_TIMEOUT_MS = 86_400_000;

/** A tool in a plugin folder: a built-in tool's shape, and how long one call may take. */
// biome-ignore lint/suspicious/noExplicitAny: as Tool's own default (a plugin lists tools of every input type)
export interface PluginTool<I = any> extends Tool<I> {
  /**
   * One call may take at most this long (ms; default 60000, at most 86400000). Past it the
   * call's `signal` aborts, the model reads "<tool> did not answer within N ms" at once, even
   * when `run` ignores the signal, and what `run` returns later is dropped.
   */
  timeout_ms?: number;
}

/** What a plugin mode's setup() may add: as a built-in mode's, with tools that may declare `timeout_ms`. */
export interface PluginModeApi extends Omit<ModeApi, 'tool'> {
  tool(tool: Parameters<ModeApi['tool']>[0] & { timeout_ms?: number }): void;
}

/** A mode in a plugin folder; the tools its setup() adds are bounded like the folder's own. */
export interface PluginMode extends Omit<AgentMode, 'setup'> {
  setup(api: PluginModeApi): void;
}

/**
 * What a plugin folder named in `[daemon] plugins` default-exports from its index
 * (index.js or index.mjs; index.ts where the daemon's Node can load TypeScript). Everything
 * listed is added to every agent's runtime while the daemon runs: modes (switched with
 * `/mode NAME` or `[agent] modes`; what their setup() adds is gated on them), tools, hooks
 * and slash commands, in the same shapes the built-in ones use. `hooks` holds turn hooks and
 * message hooks (`message_received`, `message_sent`) alike. Each call of its tools, the
 * modes' included, is bounded by the tool's `timeout_ms` (PluginTool).
 */
export interface PluginDefinition {
  /** Letters, digits, "_" and "-"; unique among the configured plugin folders. */
  name: string;
  description?: string;
  modes?: PluginMode[];
  tools?: PluginTool[];
  hooks?: Array<Hook | MessageHook>;
  commands?: SlashCommand[];
}

/** Declares a plugin folder's definition with its types checked (an identity at run time). */
export function definePluginFolder(definition: PluginDefinition): PluginDefinition {
  return definition;
}
