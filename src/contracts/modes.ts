import type { SlashCommand } from './commands.js';
import type { Hook } from './hooks.js';
import type { Tool } from './tools.js';
import type { TurnContext } from './turn.js';

/** A part of the system prompt; contributors are joined by priority, then name. */
export interface PromptContributor {
  name: string;
  priority?: number;
  mode?: string;
  contribute(ctx: TurnContext): string | undefined | Promise<string | undefined>;
}

/** What a mode's setup() may add; everything it adds is gated on the mode. */
export interface ModeApi {
  command(cmd: Omit<SlashCommand, 'mode'>): void;
  /** Offered while this mode is on; `requires_modes` names other modes that also offer it (any of them). */
  tool(tool: Omit<Tool, 'requires_modes'> & { requires_modes?: string[] }): void;
  hook(hook: Omit<Hook, 'mode'>): void;
  prompt(contributor: Omit<PromptContributor, 'mode'>): void;
}

/** A behaviour that bundles commands, tools, hooks and prompt contributors behind one setup(). */
export interface AgentMode {
  name: string;
  description: string;
  setup(api: ModeApi): void;
}
