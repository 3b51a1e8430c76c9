import type { TurnRecord } from '../contracts/turn.js';
import type { AgentEvent, Usage } from '../contracts/agent-events.js';

/**
 * Folds AgentEvents into a TurnRecord. The first done, error or cancelled ends the turn,
 * with the partial output kept; later events are ignored (fold says so).
 */
export class TurnReducer {
  readonly turn: TurnRecord = { text: '', reasoning: '', toolCalls: [], ending: undefined };
  /** The sum of the turn's `usage` events: the model steps reported so far. */
  readonly steps: Usage = { inputTokens: 0, outputTokens: 0, reasoningTokens: 0, cachedTokens: 0, estimated: false };

  /** Applies an event; false when the turn had already ended and the event was ignored. */
  fold(event: AgentEvent): boolean {
    const t = this.turn;
    if (t.ending) return false;
    switch (event.type) {
      case 'text_delta':
        t.text += event.text;
        break;
      case 'reasoning_delta':
        t.reasoning += event.text;
        break;
      case 'tool_start':
        t.toolCalls.push({ id: event.id, name: event.name, input: event.input });
        break;
      case 'tool_end': {
        const call = t.toolCalls.find((c) => c.id === event.id);
        if (call) Object.assign(call, event.error !== undefined ? { error: event.error } : { output: event.output });
        break;
      }
      case 'tool_log':
        break;
      case 'usage':
        this.steps.inputTokens += event.usage.inputTokens;
        this.steps.outputTokens += event.usage.outputTokens;
        this.steps.reasoningTokens! += event.usage.reasoningTokens ?? 0;
        this.steps.cachedTokens! += event.usage.cachedTokens ?? 0;
        break;
      case 'error':
        if (event.keepChars !== undefined) t.text = t.text.slice(0, event.keepChars);
        t.ending = event;
        break;
      case 'done':
      case 'cancelled':
        t.ending = event;
        break;
    }
    return true;
  }
}
