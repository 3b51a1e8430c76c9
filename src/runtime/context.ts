import type { AgentEvent, TurnEnding } from '../agent/events.js';
import { TurnReducer, type ToolCallRecord } from '../agent/reducer.js';
import type { AgentInput, AgentRunner, HistoryMessage } from '../agent/runner.js';
import type { Attachment, ChannelMessage } from '../dispatch/message.js';

/** Where a turn's output goes; ReplyStream implements it. */
export interface ReplySink {
  push(event: AgentEvent): void;
}

/** What the dispatcher hands the runtime for one turn. */
export interface TurnRequest {
  message: ChannelMessage;
  scope: string;
  /** The bot's username on this platform, for `/cmd@botname`. */
  botName?: string;
  /** Aborted by /stop, interrupt, or shutdown. */
  signal: AbortSignal;
  reply: ReplySink;
  /** Passive context gathered since the last addressed turn (unaddressed group messages). */
  passive?: ChannelMessage[];
  /** Told which model is being tried (the task tracker shows it). */
  onModel?: (model: string) => void;
  /**
   * What a `/word` that names no command does: `reply` answers "unknown command, see /help"
   * (the default); `agent` hands the text to the model, for bots that take free-form slash text.
   */
  unknownCommands?: 'reply' | 'agent';
  /** The channel's attachment download (the adapter's, with the bot's credentials). */
  download?: (attachment: Attachment, options: { maxBytes: number; signal: AbortSignal }) => Promise<Buffer>;
}

/** The typed per-request context hooks read and write. */
export class TurnContext {
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
