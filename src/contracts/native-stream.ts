import type { TransportOptions } from './transport.js';
import type { MessageRef } from './message.js';

/**
 * One tool call, as a native stream that shows tool progress itself is told of it
 * (`NativeStream.showsToolProgress`): the same `id` is the same call, shown once and updated in place.
 */
export interface ToolProgress {
  /** The tool call's id (the `id` of its AgentEvent `tool_start`). */
  readonly id: string;
  /** The tool's name. */
  readonly name: string;
  /** The latest progress note the call gave (its last `tool_log`), when it gave one. */
  readonly note?: string;
  /** `failed`: its `tool_end` carried an error, or the turn ended in an error or a stop with the call still running. */
  readonly state: 'running' | 'done' | 'failed';
}

/** What `update` and `finish` are given: the request's options and, for a stream that shows tool progress, what changed. */
export interface NativeStreamOptions extends TransportOptions {
  /**
   * Passed only to a stream that `showsToolProgress`, and only when something changed: each
   * tool call whose state changed since the last call the stream took, at its latest state.
   * Coalesced: one entry per call, so many notes between two steps come as the last one, and a
   * call that started and ended between two steps comes once, ended.
   */
  progress?: readonly ToolProgress[];
}

/**
 * A platform's own streaming draft (a draft message the platform animates, a chat stream). The
 * stream always passes the whole text so far; an adapter whose platform appends sends
 * only what is new.
 */
export interface NativeStream {
  /**
   * Shows the text so far. Absent where the stream shows nothing before its end (a room, or
   * a client, that cannot show a message corrected): the reply then sends no drafts, its user
   * sees typing, and `finish` sends the whole text.
   */
  update?(text: string, options: NativeStreamOptions): Promise<void>;
  /**
   * Ends the stream with the full text (at most one message long); returns the message that holds it.
   * `update` and `finish` reject with the code REPLY_STOPPED_BY_USER when the platform says its
   * user stopped the answer (a Stop button): the reply sends nothing more of it, in any form, and
   * a turn still running stops as `/stop` stops it, nothing queued in the conversation dropped.
   */
  finish(text: string, options: NativeStreamOptions): Promise<MessageRef>;
  /**
   * `finish` sends a new message (the drafts were a preview, not a message): it is not paced
   * with the drafts and goes the moment the answer is complete, waiting only out a 429.
   */
  finishSendsMessage?: boolean;
  /**
   * The stream shows the reply's tool calls itself, beside the text (with `[[agents]]
   * show_tool_progress` on). The reply then leaves the progress line (`⏳ tool… note`) out of
   * the text it passes and gives what changed as `progress` on the same `update` or `finish`
   * that carries that step's text: one request a step, paced as every draft is; a step also
   * goes when only a tool changed. The turn's end (`finish` with `final`) reports a call still
   * running as `done` (the turn ended normally) or `failed` (an error or a stop); a `finish`
   * because the text outgrew one message reports it as it is. A stream that cannot show the
   * progress it is given (the platform refused it, or the stream's message no longer streams)
   * rejects with CHANNEL_PROGRESS_REFUSED, nothing of that call taken: the reply puts the
   * progress line back in the text for the rest of the reply, passes no more `progress`, and
   * makes the step again at once. Absent: the progress line is in the text, as for any reply.
   */
  readonly showsToolProgress?: true;
  /** The reply makes no more calls on this stream and did not end it (gave up on its end, went on without it): a stream still open must end itself, once, under its own bound. */
  release?(): void;
  /**
   * The message the stream posted (a chat stream that starts as a message), known when it
   * opened or once its first `update` was answered. It is stored with the reply's messages as
   * soon as it is known, so a turn run again after a crash edits it instead of posting a
   * second one, and a reply whose stream fails (or outlives the platform's limit) goes on by
   * editing it.
   */
  readonly ref?: MessageRef;
}
