import type { AgentMode } from '../contracts/modes.js';
import { CodedError } from '../contracts/errors.js';
import type { SlashCommand } from '../contracts/commands.js';
import type { Hook } from '../contracts/hooks.js';
import type { PromptContributor } from '../contracts/modes.js';
import type { Tool } from '../contracts/tools.js';

/** The registries a mode's setup() adds to (a Runtime has them all). */
export interface ModeTargets {
  commands: { register(cmd: SlashCommand): () => void };
  tools: { register(tool: Tool): () => void };
  hooks: { register(hook: Hook): () => void };
  prompt: { register(contributor: PromptContributor): () => void };
}

/**
 * Registers modes on a runtime's registries, once each; returns a disposer per mode that
 * removes all it added. Whether a mode is on is the conversation's choice (the runtime's
 * `modesOf`); everything a mode adds is gated on it.
 */
export class ModeRegistry {
  readonly #modes = new Map<string, AgentMode>();

  constructor(private readonly targets: ModeTargets) {}

  register(mode: AgentMode): () => void {
    if (this.#modes.has(mode.name)) throw new CodedError('MODE_DUPLICATE', `mode "${mode.name}" is already registered`);
    const disposers: Array<() => void> = [];
    const rt = this.targets;
    try {
      mode.setup({
        command: (c) => disposers.push(rt.commands.register({ ...c, mode: mode.name })),
        // requires_modes is "any of": the tool is offered while this mode, or one of the others it names, is on.
        tool: (t) => disposers.push(rt.tools.register({ ...t, requires_modes: [mode.name, ...(t.requires_modes ?? [])] })),
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
