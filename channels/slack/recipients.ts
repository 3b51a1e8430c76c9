import type { ChannelMessage, ReplyTarget } from '../../src/contracts/message.js';

/** Who a streamed answer is for: chat.startStream's recipient_user_id and recipient_team_id. */
export interface SlackRecipient {
  recipient_user_id: string;
  recipient_team_id: string;
}

/**
 * Senders remembered, newest last; the oldest is forgotten past this. A reply opens its stream
 * within seconds of its message arriving (minutes when the lane is busy), so this is far more
 * than the messages waiting for an answer at any one time.
 */
export const MAX_REMEMBERED_SENDERS = 10_000;

/**
 * Slack streams to a channel (not a DM) only with the user it is for and that user's team
 * (chat.startStream refuses the call without them). A ReplyTarget carries neither, only
 * the id of the message it answers; the adapter keeps each message's sender here, by that id,
 * as it delivers the message.
 */
export class SlackRecipients {
  readonly #byMessage = new Map<string, SlackRecipient>();

  constructor(readonly max = MAX_REMEMBERED_SENDERS) {}

  /** Keeps `msg`'s sender; `team` is the sender's team (Slack Connect: not always the bot's). */
  remember(msg: ChannelMessage, team: string | undefined): void {
    if (!team || msg.synthetic) return;
    this.#byMessage.delete(msg.messageId);
    this.#byMessage.set(msg.messageId, { recipient_user_id: msg.sender.id, recipient_team_id: team });
    if (this.#byMessage.size > this.max) this.#byMessage.delete(this.#byMessage.keys().next().value!);
  }

  /** The recipient of a reply to `target`, when its message was delivered by this process. */
  of(target: ReplyTarget): SlackRecipient | undefined {
    return target.replyToMessageId === undefined ? undefined : this.#byMessage.get(target.replyToMessageId);
  }
}
