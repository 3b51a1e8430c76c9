import type { ChannelAdapter, ChannelCapabilities, Deliver } from '../../src/contracts/channel.js';
import type { MessageRef, ReplyTarget } from '../../src/contracts/message.js';
import { ChannelError } from '../../src/contracts/errors.js';

/** What one listen() attempt does. */
export type Step =
  | { kind: 'fail'; error: Error; afterMs?: number }
  | { kind: 'connect'; thenFail?: { error: Error; afterMs: number }; thenReturnAfterMs?: number }
  | { kind: 'hang' }
  | { kind: 'return' };

export const retryable = (msg = 'socket dropped') => new ChannelError('CHANNEL_NETWORK', msg);
export const fatal = (msg = 'bad token') => new ChannelError('CHANNEL_AUTH_FAILED', msg);

/** An adapter whose listen() follows a script, one step per attempt; the last step repeats. */
export class ScriptedAdapter implements ChannelAdapter {
  readonly capabilities: ChannelCapabilities = { maxMessageLength: 4000, editsDrafts: true, minEditIntervalMs: 0, nativeStream: false, typing: false };
  readonly selfId = 'bot';
  attempts = 0;
  /** Each attempt's abort signal, so tests can see that a stop reached the listener. */
  readonly signals: AbortSignal[] = [];
  /** How many listen() calls have returned or thrown. */
  settled = 0;
  deliver: Deliver | undefined;

  constructor(
    readonly id: string,
    private readonly script: Step[],
  ) {}

  listen(deliver: Deliver, signal: AbortSignal, onConnected: () => void): Promise<void> {
    this.deliver = deliver;
    const step = this.script[Math.min(this.attempts, this.script.length - 1)]!;
    this.attempts++;
    this.signals.push(signal);
    const done = () => void this.settled++;
    return new Promise<void>((resolve, reject) => {
      const timers: NodeJS.Timeout[] = [];
      signal.addEventListener(
        'abort',
        () => {
          timers.forEach(clearTimeout);
          resolve();
        },
        { once: true },
      );
      // No delay means now (fake timers would turn setTimeout 0 into 1 ms).
      const at = (ms: number, fn: () => void) => (ms > 0 ? timers.push(setTimeout(fn, ms)) : queueMicrotask(fn));
      switch (step.kind) {
        case 'fail':
          at(step.afterMs ?? 0, () => reject(step.error));
          break;
        case 'connect':
          onConnected();
          if (step.thenFail) at(step.thenFail.afterMs, () => reject(step.thenFail!.error));
          if (step.thenReturnAfterMs !== undefined) at(step.thenReturnAfterMs, () => resolve());
          break;
        case 'return':
          at(0, () => resolve());
          break;
        case 'hang':
          break;
      }
    }).finally(done);
  }

  async send(target: ReplyTarget, _text: string): Promise<MessageRef> {
    return { chatId: target.chatId, messageId: 'x' };
  }
  async edit(): Promise<void> {}
  async delete(): Promise<void> {}
  async typing(): Promise<void> {}
}
