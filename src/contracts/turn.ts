import type { AgentInput, AgentRunner, HistoryMessage } from './agent-runner.js';
import type { AgentEvent, TurnEnding, Usage } from './agent-events.js';
import type { Attachment, ChannelMessage } from './message.js';

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

export interface ToolCallRecord {
  id: string;
  name: string;
  input: unknown;
  output?: unknown;
  error?: string;
}

/** A turn as it will be persisted: the model's text, reasoning kept apart, tool calls, ending. */
export interface TurnRecord {
  text: string;
  reasoning: string;
  toolCalls: ToolCallRecord[];
  ending: TurnEnding | undefined;
}

/**
 * The typed per-request context every hook, command and prompt contributor receives. The
 * runtime owns its lifecycle; extensions read it and write the fields documented as theirs.
 */
export interface TurnContext {
  readonly request: TurnRequest;
  /** Modes active in this conversation. */
  readonly modes: ReadonlySet<string>;
  readonly startedAt: number;
  /** Free-form values hooks pass each other; setup/cleanup pairs keep their handles here. */
  readonly extras: Map<string, unknown>;
  /** Earlier turns for the model; the session-load hook fills it. */
  history: HistoryMessage[];
  /** Built by the agent-build step from the prompt and history; post_agent_build hooks may adjust it. */
  input: AgentInput | undefined;
  runner: AgentRunner | undefined;
  /** A readable message for the user when the turn fails; on_error hooks set it. */
  errorReply: string | undefined;
  error: unknown;
  /** The slash command that handled this turn, if any. */
  command: string | undefined;
  readonly message: ChannelMessage;
  readonly scope: string;
  readonly signal: AbortSignal;
  /** The model's own words so far (no markers). */
  readonly text: string;
  readonly reasoning: string;
  readonly toolCalls: readonly ToolCallRecord[];
  readonly ending: TurnEnding | undefined;
  /** The tokens of the model steps reported so far (`usage` events), while the turn runs. */
  readonly stepUsage: Usage;
  /** Registers a cleanup for something a hook set up; the cleanup hook runs them in reverse. */
  onCleanup(fn: () => void | Promise<void>): void;
  /** Takes the registered cleanups, newest first. */
  takeCleanups(): Array<() => void | Promise<void>>;
  /** Sends an event to the reply; nothing after the turn's ending. */
  emit(event: AgentEvent): void;
  /** Replies with a whole text at once (commands, short circuits). */
  replyText(text: string): void;
}
