import { z } from 'zod';
import { CodedError } from '../errors.js';

export interface ToolContext {
  signal: AbortSignal;
  scope: string;
  timeZone: string;
}

/** A tool the model may call. `input` validates (and describes) its arguments. */
export interface Tool<I = any> {
  name: string;
  description: string;
  input: z.ZodType<I>;
  /** Offered only while all these modes are active in the conversation. */
  requires_modes?: string[];
  /** Offered only when the workspace has all these features. */
  requires_features?: string[];
  run(input: I, ctx: ToolContext): unknown | Promise<unknown>;
}

export interface ToolSelection {
  modes: ReadonlySet<string>;
  features: ReadonlySet<string>;
  /** The agent's `tools` allowlist; undefined offers every registered tool. */
  allow?: readonly string[];
}

/** The tools of a workspace; the agent-build step picks those that apply to one request. */
export class ToolRegistry {
  readonly #tools = new Map<string, Tool>();

  register(tool: Tool): () => void {
    if (this.#tools.has(tool.name)) throw new CodedError('COMMAND_DUPLICATE', `tool "${tool.name}" is already registered`);
    this.#tools.set(tool.name, tool);
    return () => void this.#tools.delete(tool.name);
  }

  get(name: string): Tool | undefined {
    return this.#tools.get(name);
  }

  select(sel: ToolSelection): Tool[] {
    return [...this.#tools.values()].filter(
      (t) =>
        (sel.allow === undefined || sel.allow.includes(t.name)) &&
        (t.requires_modes ?? []).every((m) => sel.modes.has(m)) &&
        (t.requires_features ?? []).every((f) => sel.features.has(f)),
    );
  }
}

/** The built-in clock: the current date and time in the agent's (or a given) time zone. */
export const currentTimeTool: Tool<{ time_zone?: string | undefined }> = {
  name: 'current_time',
  description: 'Returns the current date and time. Optionally give an IANA time zone such as "Europe/Paris".',
  input: z.object({ time_zone: z.string().optional().describe('IANA time zone; defaults to the configured one') }),
  run: ({ time_zone }, ctx) => {
    const zone = time_zone ?? ctx.timeZone;
    const now = new Date();
    let local: string;
    try {
      local = new Intl.DateTimeFormat('en-GB', { dateStyle: 'full', timeStyle: 'long', timeZone: zone }).format(now);
    } catch {
      throw new Error(`unknown time zone "${zone}"`);
    }
    return { iso: now.toISOString(), local, time_zone: zone };
  },
};
