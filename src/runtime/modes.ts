import { CodedError } from '../errors.js';
import type { SlashCommand } from './commands.js';
import type { Hook } from './hooks.js';
import type { PromptContributor } from './prompt.js';
import type { Tool } from './tools.js';
import type { Runtime } from './runtime.js';

/** What a mode's setup() may add; everything it adds is gated on the mode. */
export interface ModeApi {
  command(cmd: Omit<SlashCommand, 'mode'>): void;
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

/** Registers modes on a runtime, once each; returns a disposer per mode that removes all it added. */
export class ModeRegistry {
  readonly #modes = new Map<string, AgentMode>();

  constructor(private readonly runtime: Runtime) {}

  register(mode: AgentMode): () => void {
    if (this.#modes.has(mode.name)) throw new CodedError('COMMAND_DUPLICATE', `mode "${mode.name}" is already registered`);
    const disposers: Array<() => void> = [];
    const rt = this.runtime;
    try {
      mode.setup({
        command: (c) => disposers.push(rt.commands.register({ ...c, mode: mode.name })),
        tool: (t) => disposers.push(rt.tools.register({ ...t, requires_modes: [...(t.requires_modes ?? []), mode.name] })),
        hook: (h) => disposers.push(rt.hooks.register({ ...h, mode: mode.name })),
        prompt: (p) => disposers.push(rt.prompt.register({ ...p, mode: mode.name })),
      });
    } catch (err) {
      for (const d of disposers.reverse()) d();
      throw err;
    }
    this.#modes.set(mode.name, mode);
    return () => {
      for (const d of disposers.reverse()) d();
      this.#modes.delete(mode.name);
    };
  }

  has(name: string): boolean {
    return this.#modes.has(name);
  }

  list(): AgentMode[] {
    return [...this.#modes.values()];
  }
}
