import type { AgentEvent } from '../contracts/agent-events.js';

/**
 * One attempt at a model (a try, a retry, a fallback model). Text and tool calls are
 * visible progress: after either, the attempt is never retried or failed over (tools would
 * run twice). Its invisible events (reasoning) are held until it shows progress, so a
 * failed attempt leaves nothing behind in the stored turn.
 */
export class Attempt {
  #held: AgentEvent[] = [];
  #visible = false;

  get visible(): boolean {
    return this.#visible;
  }

  /** The events to pass on now, for one event of this attempt. */
  take(e: AgentEvent): AgentEvent[] {
    switch (e.type) {
      case 'text_delta':
      case 'tool_start':
        this.#visible = true;
        return this.#release(e);
      case 'reasoning_delta':
      case 'tool_log':
        if (this.#visible) return [e];
        this.#held.push(e);
        return [];
      case 'done':
        return this.#release(e);
      case 'error':
      case 'cancelled':
        // A failed or cancelled attempt that showed nothing: its reasoning goes with it.
        this.#held = [];
        return [e];
      default:
        return [e];
    }
  }

  #release(e: AgentEvent): AgentEvent[] {
    if (this.#held.length === 0) return [e];
    const out = [...this.#held, e];
    this.#held = [];
    return out;
  }
}
