import { sleep } from '../util/abortable.js';
import { estimateTokens, type AgentEvent } from '../contracts/agent-events.js';
import type { AgentContext, AgentInput, AgentRunner } from '../contracts/agent-runner.js';

/**
 * The built-in demo agent: streams the user's text back word by word, `delayMs` apart,
 * so drafts are visible without any model. Used by the default config.
 */
export class EchoRunner implements AgentRunner {
  readonly name = 'echo';
  constructor(private readonly delayMs: number) {}

  async *run(input: AgentInput, _ctx: AgentContext, signal: AbortSignal): AsyncIterable<AgentEvent> {
    const words = input.text.match(/\S+\s*/g) ?? [];
    let sent = 0;
    for (const word of words) {
      if (signal.aborted) return yield { type: 'cancelled' };
      if (this.delayMs > 0 && sent > 0) {
        await sleep(this.delayMs, signal);
        if (signal.aborted) return yield { type: 'cancelled' };
      }
      sent += word.length;
      yield { type: 'text_delta', text: word };
    }
    if (signal.aborted) return yield { type: 'cancelled' };
    yield { type: 'done', usage: { inputTokens: estimateTokens(input.text.length), outputTokens: estimateTokens(sent), estimated: true } };
  }
}
