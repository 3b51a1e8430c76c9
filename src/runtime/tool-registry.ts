import type { Tool, ToolContext, ToolSelection } from '../contracts/tools.js';
import { z } from 'zod';
import { CodedError } from '../contracts/errors.js';
import { raceAbort } from '../util/abortable.js';
import { cutText } from '../util/cut-text.js';
import { notOfferedBecause } from './tool-policy.js';

/** The tools of a workspace; the agent-build step picks those that apply to one request. */
export class ToolRegistry {
  readonly #tools = new Map<string, Tool>();
  readonly #sources: Array<() => readonly Tool[]> = [];

  /** Adds tools that come and go at run time (an MCP server's, while it is connected). */
  addSource(source: () => readonly Tool[]): () => void {
    this.#sources.push(source);
    return () => void this.#sources.splice(this.#sources.indexOf(source) >>> 0, 1);
  }

  register(tool: Tool): () => void {
    if (this.#tools.has(tool.name)) throw new CodedError('TOOL_DUPLICATE', `tool "${tool.name}" is already registered`);
    this.#tools.set(tool.name, tool);
    return () => void this.#tools.delete(tool.name);
  }

  get(name: string): Tool | undefined {
    return this.#tools.get(name);
  }

  /** Every tool, offered or not (`/tools` explains the ones that are not). */
  all(): Tool[] {
    return [...this.#tools.values(), ...this.#sources.flatMap((s) => s())];
  }

  /** The tools offered under `sel`; see notOfferedBecause for the rules. */
  select(sel: ToolSelection): Tool[] {
    return this.all().filter((t) => notOfferedBecause(t, sel).length === 0);
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

export { cutText };

/**
 * The same tool with its result bounded to `max` characters: a long string is cut; a value
 * whose JSON is too long becomes its cut JSON text. A tool error (`{error}`) is cut alike.
 */
export function boundedTool<I>(t: Tool<I>, max: number): Tool<I> {
  return {
    ...t,
    // A description is text the model reads too (a tool server writes it).
    description: cutText(t.description, max),
    run: async (input, ctx) => {
      const out = await t.run(input, ctx);
      if (typeof out === 'string') return cutText(out, max);
      if (out && typeof out === 'object' && typeof (out as { error?: unknown }).error === 'string' && Object.keys(out).length === 1)
        return { error: cutText((out as { error: string }).error, max) };
      if (out === undefined) return out;
      const json = JSON.stringify(out);
      return json !== undefined && json.length > max ? cutText(json, max) : out;
    },
  };
}

/**
 * The same tool with each call bounded to `timeoutMs`. Past it the call's `signal` aborts (a
 * well-behaved `run` stops), the caller gets `{ error: "<tool> did not answer within N ms" }`
 * at once even when `run` ignores the signal, `onTimeout` hears of it (the daemon warns), and
 * what `run` returns later is dropped. A call whose own signal aborts first (`/stop tool`, the
 * turn stopped) ends with that reason, as without the bound. The timer goes when the call
 * ends, however it ends.
 */
export function timedTool<I>(t: Tool<I>, timeoutMs: number, onTimeout: (err: CodedError, ctx: ToolContext) => void): Tool<I> {
  return {
    ...t,
    run: async (input, ctx) => {
      const late = `${t.name} did not answer within ${timeoutMs} ms`;
      const deadline = new AbortController();
      const timer = setTimeout(() => deadline.abort(new CodedError('PLUGIN_TOOL_TIMEOUT', late)), timeoutMs);
      const signal = AbortSignal.any([ctx.signal, deadline.signal]);
      try {
        // Through a microtask, so a `run` that throws at once is a rejection like any other.
        return await raceAbort(
          Promise.resolve().then(() => t.run(input, { ...ctx, signal })),
          signal,
        );
      } catch (err) {
        // Only this bound's own reason: the caller's abort, or a throw of `run`, goes on up unchanged.
        if (!(err instanceof CodedError) || err !== deadline.signal.reason) throw err;
        onTimeout(err, ctx);
        // The model reads what happened, not the catalogue's note for the operator.
        return { error: late };
      } finally {
        clearTimeout(timer);
      }
    },
  };
}
