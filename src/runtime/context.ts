import type { TurnContext, TurnRequest } from '../contracts/turn.js';
import type { AgentEvent, TurnEnding, Usage } from '../contracts/agent-events.js';
import { TurnReducer } from '../agent/reducer.js';
import type { ToolCallRecord } from '../contracts/turn.js';
import type { AgentInput, AgentRunner, HistoryMessage } from '../contracts/agent-runner.js';
import type { ChannelMessage } from '../contracts/message.js';

/** The runtime's TurnContext: one per turn, folding its events with a TurnReducer. */
export class Turn implements TurnContext {
  readonly startedAt = Date.now();
  /** Free-form values hooks pass each other; setup/cleanup pairs keep their handles here. */
  readonly extras = new Map<string, unknown>();
  /** Earlier turns for the model; the session-load hook fills it. */
  history: HistoryMessage[] = [];
  /** Built by the agent-build step from the prompt and history; post_agent_build hooks may adjust it. */
  input: AgentInput | undefined;
  runner: AgentRunner | undefined;
  /** Folds the turn's events: text (the model's own words, no markers), reasoning, tool calls, ending. */
  readonly reducer = new TurnReducer();
  /** A readable message for the user when the turn fails; on_error hooks set it. */
  errorReply: string | undefined;
  readonly #cleanups: Array<() => void | Promise<void>> = [];
  error: unknown;
  /** The slash command that handled this turn, if any. */
  command: string | undefined;

  constructor(
    readonly request: TurnRequest,
    /** Modes active in this conversation. */
    readonly modes: ReadonlySet<string>,
  ) {}

  get message(): ChannelMessage {
    return this.request.message;
  }
  get scope(): string {
    return this.request.scope;
  }
  get signal(): AbortSignal {
    return this.request.signal;
  }

  /** Registers a cleanup for something a hook set up; the cleanup hook runs them in reverse. */
  onCleanup(fn: () => void | Promise<void>): void {
    this.#cleanups.push(fn);
  }

  /** Takes the registered cleanups, newest first. */
  takeCleanups(): Array<() => void | Promise<void>> {
    return this.#cleanups.splice(0).reverse();
  }

  get text(): string {
    return this.reducer.turn.text;
  }
  get reasoning(): string {
    return this.reducer.turn.reasoning;
  }
  get toolCalls(): readonly ToolCallRecord[] {
    return this.reducer.turn.toolCalls;
  }
  get ending(): TurnEnding | undefined {
    return this.reducer.turn.ending;
  }
  get stepUsage(): Usage {
    return this.reducer.steps;
  }

  /** Sends an event to the reply; nothing after the turn's ending. */
  emit(event: AgentEvent): void {
    if (this.reducer.fold(event)) this.request.reply.push(event);
  }

  /** Replies with a whole text at once (commands, short circuits). */
  replyText(text: string): void {
    this.emit({ type: 'text_delta', text });
    this.emit({ type: 'done', usage: { inputTokens: 0, outputTokens: 0, estimated: true } });
  }
}
