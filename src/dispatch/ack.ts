import type { Logger } from '../observe/logger.js';
import type { DispatchChannel } from './channel.js';
import type { ChannelMessage, MessageRef } from '../contracts/message.js';

/**
 * How long one reaction request may take. A reaction is a hint, and the removal waits for
 * the adding: one that has not landed by then is given up rather than holding the removal.
 */
const ACK_REACTION_TIMEOUT_MS = 10_000;

/**
 * The channel's `ack_reaction` on a user's message: set once the message is stored, taken
 * off when its turn ends (answered, failed, stopped or dropped). Never awaited by the turn,
 * so a slow or refused reaction cannot delay an answer; per message the removal waits for
 * the adding, so a fast answer cannot leave a reaction behind.
 */
export class AckReactions {
  readonly #pending = new Map<string, Promise<void>>();

  constructor(
    private readonly channel: (id: string) => DispatchChannel | undefined,
    private readonly log: Logger,
  ) {}

  /** Puts the reaction on (`on`) or takes it off; does nothing where the channel has none. */
  set(msg: ChannelMessage, on: boolean): void {
    if (msg.synthetic) return;
    const ch = this.channel(msg.channelId);
    const emoji = ch?.config.ack_reaction;
    // Bound only where there is a reaction to set: most channels have none, and this runs twice per message.
    if (!emoji || !ch.adapter.setReaction) return;
    const react = ch.adapter.setReaction.bind(ch.adapter);
    const key = `${msg.channelId}\u0000${msg.messageId}`;
    const ref: MessageRef = { chatId: msg.chat.id, messageId: msg.messageId, ...(msg.threadId ? { threadId: msg.threadId } : {}) };
    const before = this.#pending.get(key) ?? Promise.resolve();
    const next = before
      .then(() => react(ref, emoji, on, { signal: AbortSignal.timeout(ACK_REACTION_TIMEOUT_MS) }))
      .catch((err: unknown) => this.log.debug({ err, channel: msg.channelId, on }, 'ack reaction not set'));
    if (on) this.#pending.set(key, next);
    else {
      this.#pending.delete(key);
      void next;
    }
  }
}
