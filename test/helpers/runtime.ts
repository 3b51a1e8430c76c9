import type { AgentEvent } from '../../src/contracts/agent-events.js';
import type { AgentInput, AgentRunner } from '../../src/contracts/agent-runner.js';
import type { TurnRequest } from '../../src/contracts/turn.js';
import { Runtime, type RuntimeOptions } from '../../src/runtime/runtime.js';
import { userMessage } from './recording-adapter.js';

/** A runner that records its input and answers with `reply` (or throws / errors). */
export class ScriptedRunner implements AgentRunner {
  readonly name = 'scripted';
  inputs: AgentInput[] = [];
  constructor(
    public script: AgentEvent[] | (() => never) = [
      { type: 'text_delta', text: 'agent answer' },
      { type: 'done', usage: { inputTokens: 1, outputTokens: 1, estimated: true } },
    ],
  ) {}
  async *run(input: AgentInput): AsyncIterable<AgentEvent> {
    this.inputs.push(input);
    if (typeof this.script === 'function') this.script();
    yield* this.script as AgentEvent[];
  }
}

/** A sink that keeps every event. */
export function sink(): { events: AgentEvent[]; push(e: AgentEvent): void; text(): string } {
  const events: AgentEvent[] = [];
  return { events, push: (e) => void events.push(e), text: () => events.flatMap((e) => (e.type === 'text_delta' ? [e.text] : [])).join('') };
}

export function bareRuntime(runner = new ScriptedRunner(), over: Partial<RuntimeOptions> = {}): { runtime: Runtime; runner: ScriptedRunner; errors: string[] } {
  const errors: string[] = [];
  const runtime = new Runtime({ runnerFor: () => runner, onHookError: (phase, hook) => void errors.push(`${phase}:${hook}`), ...over });
  return { runtime, runner, errors };
}

export function request(text: string, reply = sink(), over: Partial<TurnRequest> = {}): TurnRequest {
  return { message: userMessage('t', text), scope: 't:chat-1', signal: new AbortController().signal, reply, botName: 'mybot', ...over };
}
