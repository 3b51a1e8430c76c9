import type { Schema } from 'ai';
import type { z } from 'zod';
import type { ChannelMessage } from './message.js';

export interface ToolContext {
  signal: AbortSignal;
  scope: string;
  timeZone: string;
  /** The model's id for this call (tool_start/tool_end carry it). */
  callId?: string;
  /**
   * Where the call sits in its turn: the model step (from 0) and its place among that step's
   * calls. Unlike `callId` (new on every request) it is the same when a turn is re-run, so it
   * tells a call repeated in a later step apart from the same call made again after a restart.
   */
  position?: { step: number; index: number };
  /** The message that started the turn: who may approve, where to ask. */
  message?: ChannelMessage;
  /**
   * Reports progress of this call: each line becomes a `tool_log` event, and a reply with
   * `show_tool_progress` shows the newest next to the tool's name while it runs.
   */
  log?: (text: string) => void;
}

/**
 * A tool the model may call. `input` validates (and describes) its arguments: a zod schema,
 * or a JSON schema wrapped with the AI SDK's `jsonSchema()` (tools from MCP servers).
 */
// biome-ignore lint/suspicious/noExplicitAny: registries hold tools of every input type; `unknown` would make Tool<{ city: string }> unassignable to Tool
export interface Tool<I = any> {
  name: string;
  description: string;
  input: z.ZodType<I> | Schema<I>;
  /** Offered only while at least one of these modes is active in the conversation (any, not all). */
  requires_modes?: string[];
  /** Offered only when the workspace has all these features. */
  requires_features?: string[];
  /**
   * Offered only to an agent that runs with a sandbox (`[agent] sandbox = true`: the operator
   * declares that the daemon's tools run confined, e.g. in a container without the host's files).
   */
  requires_sandbox?: boolean;
  /** false: offered only to an agent whose `[agent] tools` allowlist names it. Default true. */
  enabled_by_default?: boolean;
  /**
   * Whether a call asks in the chat before it runs (default "never"). The agent's
   * `[agent] tool_approval` overrides it either way.
   */
  approval?: 'never' | 'always';
  /** Offered only once all these skills were loaded (`load_skill`) in the running turn. */
  requires_skills?: string[];
  run(input: I, ctx: ToolContext): unknown | Promise<unknown>;
}

export interface ToolSelection {
  modes: ReadonlySet<string>;
  features: ReadonlySet<string>;
  /** The agent's `tools` allowlist; undefined offers every registered tool. */
  allow?: readonly string[];
  /** The agent runs with a sandbox: `requires_sandbox` tools may be offered. */
  sandbox?: boolean;
  /** Skills that count as loaded; a tool with `requires_skills` is offered only when all are here. */
  skills?: ReadonlySet<string>;
}

/**
 * What the model reads for a call that went on in the background (`[agent]
 * background_after_ms`); its result comes later as a follow-up turn.
 */
export const BACKGROUND_REPLY = {
  background: true,
  status: 'running in the background',
  note: 'The result will come later as a new message in this conversation. Answer without it now and do not call the tool again for it.',
} as const;

/** Whether a tool's result is the background placeholder (the reply stream tells the user so). */
export function isBackgroundReply(output: unknown): boolean {
  return typeof output === 'object' && output !== null && (output as { background?: unknown }).background === true;
}
