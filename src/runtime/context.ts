import type { AgentEvent } from '../agent/events.js';
import type { AgentInput, AgentRunner, HistoryMessage } from '../agent/runner.js';
import type { ChannelMessage } from '../dispatch/message.js';

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
  /** The assistant text produced so far. */
  text = '';
  ending: Extract<AgentEvent, { type: 'done' | 'error' | 'cancelled' }> | undefined;
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

  /** Sends an event to the reply, tracking text and the ending. */
  emit(event: AgentEvent): void {
    if (this.ending) return;
    if (event.type === 'text_delta') this.text += event.text;
    if (event.type === 'done' || event.type === 'error' || event.type === 'cancelled') this.ending = event;
    this.request.reply.push(event);
  }

  /** Replies with a whole text at once (commands, short circuits). */
  replyText(text: string): void {
    this.emit({ type: 'text_delta', text });
    this.emit({ type: 'done', usage: { inputTokens: 0, outputTokens: 0, estimated: true } });
  }
}
