import { sleep } from '../../src/util/abortable.js';

/**
 * Outgoing lines are paced by a token bucket, as IRC servers' flood limits expect: `burst`
 * lines at once, then one every `intervalMs`. Waiters go in order (one chain), and each
 * wait ends when its signal aborts.
 */
export class TokenBucket {
  #tokens: number;
  #at = Date.now();
  #tail: Promise<void> = Promise.resolve();

  constructor(
    private readonly burst: number,
    private readonly intervalMs: number,
  ) {
    this.#tokens = burst;
  }

  /** Resolves when one line may go; rejects with the signal's reason if it aborts first. */
  take(signal: AbortSignal): Promise<void> {
    const turn = this.#tail.then(() => this.#wait(signal));
    // The next waiter waits for this one whether it got its token or was cut off.
    this.#tail = turn.catch(() => {});
    return turn;
  }

  async #wait(signal: AbortSignal): Promise<void> {
    for (;;) {
      signal.throwIfAborted();
      this.#refill();
      if (this.#tokens >= 1) {
        this.#tokens -= 1;
        return;
      }
      await sleep(Math.ceil((1 - this.#tokens) * this.intervalMs), signal);
    }
  }

  #refill(): void {
    const now = Date.now();
    this.#tokens = this.intervalMs === 0 ? this.burst : Math.min(this.burst, this.#tokens + (now - this.#at) / this.intervalMs);
    this.#at = now;
  }
}
