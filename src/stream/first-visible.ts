/**
 * A draft held this long for other replies' first messages was held by a burst: it then goes
 * one interval later (src/stream/reply-stream.ts). A shorter hold (another reply's first
 * request in flight, in normal running) lets it go at once, so drafts keep their pace when the
 * daemon is not busy.
 */
export const HELD_LONG_MS = 100;

/**
 * Replies across the daemon that have text but nothing shown yet. While any waits, the
 * mid-answer draft edits of replies already visible wait too (their final text never does):
 * under a burst, what users feel first is whether anything shows at all, and a draft edit
 * only refreshes what its user already sees. Nothing is lost: a deferred edit carries the
 * newest text when it goes, or the final text replaces it.
 */
export class FirstVisibleFirst {
  #waiting = 0;
  readonly #onClear = new Set<() => void>();

  /** Replies waiting for their first message now. */
  get waiting(): number {
    return this.#waiting;
  }

  /** One reply has text and nothing shown; the returned release (idempotent) ends its wait. */
  enter(): () => void {
    this.#waiting++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (--this.#waiting > 0) return;
      for (const wake of [...this.#onClear]) wake();
    };
  }

  /**
   * Resolves true once no reply waits for its first message, or when `signal` aborts; false
   * when the wake handed to `onWake` ended it first (its owner's own reason to stop waiting).
   */
  clear(signal: AbortSignal, onWake?: (wake: () => void) => void): Promise<boolean> {
    if (this.#waiting === 0 || signal.aborted) return Promise.resolve(true);
    return new Promise((resolve) => {
      const end = (cleared: boolean) => {
        this.#onClear.delete(wake);
        signal.removeEventListener('abort', wake);
        resolve(cleared);
      };
      const wake = () => end(true);
      this.#onClear.add(wake);
      signal.addEventListener('abort', wake, { once: true });
      onWake?.(() => end(false));
    });
  }

  /**
   * Waits while any reply has nothing shown, until `signal` aborts or the wake handed to
   * `onWake` (once per wait) is called; how long it waited, 0 when none did.
   */
  async heldMs(signal: AbortSignal, onWake?: (wake: () => void) => void): Promise<number> {
    if (this.#waiting === 0) return 0;
    const from = Date.now();
    let cleared = true;
    while (cleared && this.#waiting > 0 && !signal.aborted) cleared = await this.clear(signal, onWake);
    return Date.now() - from;
  }

  /** Like heldMs: true when the wait was long enough to be a burst (HELD_LONG_MS). */
  async heldLong(signal: AbortSignal, onWake?: (wake: () => void) => void): Promise<boolean> {
    return (await this.heldMs(signal, onWake)) >= HELD_LONG_MS;
  }
}
