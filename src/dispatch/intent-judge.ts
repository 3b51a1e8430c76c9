import { INTENT_CONTEXT_MESSAGES } from '../agent/intent.js';
import type { ChannelMessage } from '../contracts/message.js';
import type { Logger } from '../observe/logger.js';
import type { Metrics } from '../observe/metrics.js';
import { IntentLimiter, type PassiveContext } from './access.js';
import type { IntentDecision } from './options.js';

interface IntentJudgeOptions {
  classify(msg: ChannelMessage, recent: readonly ChannelMessage[], signal: AbortSignal): Promise<IntentDecision>;
  passive: PassiveContext;
  metrics: Metrics;
  log: Logger;
  /** False once the dispatcher stops taking messages. */
  accepting(): boolean;
  /** Delivers a message again (as addressed). */
  deliver(msg: ChannelMessage): Promise<boolean>;
}

/**
 * reply_intent = "classifier": asks the classifier about an unaddressed group message
 * (rate-limited per group); on "reply" the message is taken out of the context and
 * delivered again as addressed. Runs after the platform was acknowledged: the message was
 * not stored, as any unaddressed one.
 */
export class IntentJudge {
  readonly #o: IntentJudgeOptions;
  readonly #limiter = new IntentLimiter();
  /** Messages the classifier chose to answer, delivered again as addressed: not new to observers. */
  readonly #judged = new WeakSet<ChannelMessage>();
  /** Aborted at shutdown: classifier calls still running stop. */
  readonly #closing = new AbortController();

  constructor(options: IntentJudgeOptions) {
    this.#o = options;
  }

  /** A message this judge delivered again: observers saw it when it came in. */
  judged(msg: ChannelMessage): boolean {
    return this.#judged.has(msg);
  }

  async judge(msg: ChannelMessage, scope: string): Promise<void> {
    const { metrics, passive } = this.#o;
    if (!this.#limiter.take(`${msg.channelId}:${msg.chat.id}`)) {
      metrics.intentCalls.inc({ channel: msg.channelId, decision: 'rate_limited' });
      return;
    }
    try {
      // The newest message (this one, kept as context until judged) and the ones before it.
      const recent = passive.peek(scope).slice(-(INTENT_CONTEXT_MESSAGES + 1));
      const decision = await this.#o.classify(msg, recent, this.#closing.signal);
      if (decision !== 'reply' || !this.#o.accepting()) return;
      passive.remove(scope, msg.messageId);
      const addressed = { ...msg, addressed: true };
      this.#judged.add(addressed);
      await this.#o.deliver(addressed);
    } catch (err) {
      this.#o.log.warn({ err, channel: msg.channelId }, 'a message the classifier chose to answer could not be taken');
    }
  }

  close(): void {
    this.#closing.abort();
  }
}
