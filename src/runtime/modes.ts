import type { AgentMode } from '../contracts/modes.js';
import { CodedError } from '../contracts/errors.js';
import type { SlashCommand } from '../contracts/commands.js';
import type { Hook } from '../contracts/hooks.js';
import type { PromptContributor } from '../contracts/modes.js';
import type { Tool } from '../contracts/tools.js';
import type { Runtime } from './runtime.js';

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
