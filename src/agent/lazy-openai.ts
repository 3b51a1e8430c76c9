import type { AgentEvent } from '../contracts/agent-events.js';
import type { OpenAICompatibleOptions } from './openai-compatible.js';
import type { AgentContext, AgentInput, AgentRunner } from '../contracts/agent-runner.js';

/** The AI SDK costs about 100 ms and 20 MB to load; a daemon that never asks a model never loads it. */
const load = () => import('./openai-compatible.js');

/** Loads the SDK soon after start-up, off the path to ready, when a model agent exists. */
export function warmOpenAI(): void {
  setTimeout(() => void load().catch(() => {}), 500).unref();
}

/** An OpenAICompatibleRunner whose module loads on its first turn. */
export class LazyOpenAIRunner implements AgentRunner {
  readonly name = 'openai-compatible';
  #inner: Promise<AgentRunner> | undefined;

  constructor(private readonly options: OpenAICompatibleOptions) {}

  async *run(input: AgentInput, ctx: AgentContext, signal: AbortSignal): AsyncIterable<AgentEvent> {
    const runner = await (this.#inner ??= load().then((m) => new m.OpenAICompatibleRunner(this.options)));
    yield* runner.run(input, ctx, signal);
  }
}
