import type { ChannelMessage } from './message.js';
import type { Tool } from './tools.js';
import type { AgentEvent } from './agent-events.js';

/** An image for a vision model: its bytes and media type. */
export interface ImageInput {
  data: Uint8Array;
  mediaType: string;
  name?: string;
}

export interface HistoryMessage {
  role: 'user' | 'assistant';
  content: string;
}

/** Everything a runner needs for one turn; built by the runtime's agent-build step. */
export interface AgentInput {
  system: string;
  history: HistoryMessage[];
  /** The user's message for this turn. */
  text: string;
  /** Images the user sent, for models that take them (per model `input`). */
  images?: ImageInput[];
  /** The conversation's chosen model; the runner's default otherwise. */
  model?: string;
  /** Tools offered for this request. */
  tools?: Tool[];
  /**
   * The names of `tools` offered at each model step, asked before every step; absent offers
   * them all. Tools waiting for a skill are in `tools` but not here until it is loaded.
   */
  activeTools?: () => string[];
}

export interface AgentContext {
  scope: string;
  channelId: string;
  signal: AbortSignal;
  /** Told which "provider:model" is being tried. */
  onModel?: (model: string) => void;
  /** The message that started the turn, handed to tools (approval asks its sender). */
  message?: ChannelMessage;
  /** Sends an event into the turn while a tool runs (tool_log). */
  emit?: (event: AgentEvent) => void;
}

/**
 * Runs one turn. Yields AgentEvents; ends with exactly one of done, error or cancelled.
 * `signal` aborts the run (it then ends with cancelled). A consumer that wants nothing more
 * closes the iterator instead (`return()`, as a `for await` does on break, and as the
 * repetition guard does when the answer loops): the run's `finally` blocks must then end
 * whatever it started (a provider's request, a timer).
 */
export interface AgentRunner {
  readonly name: string;
  run(input: AgentInput, ctx: AgentContext, signal: AbortSignal): AsyncIterable<AgentEvent>;
}
