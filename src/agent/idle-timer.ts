/**
 * The bound on the model's silence (`request_timeout_ms`): re-armed by every piece of its
 * output, and paused while any tool call runs. A tool sends no stream part while it runs (nor
 * does a call waiting for approval), and it has its own bounds (`timeout_ms`,
 * `approval_timeout_ms`): without the pause the model's bound would fire during a long tool or
 * a slow approver and abort the signal the tool runs on. When the last running call ends the
 * bound is armed again, so a model that says nothing after its tools still times out.
 */
export class IdleTimer {
  readonly #timeoutMs: number;
  readonly #onIdle: () => void;
  #timer: NodeJS.Timeout | undefined;
  #running = 0;
  #stopped = false;

  constructor(timeoutMs: number, onIdle: () => void) {
    this.#timeoutMs = timeoutMs;
    this.#onIdle = onIdle;
  }

  /** The model said something (or is asked now): the wait starts again, unless a tool runs. */
  touch(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#running > 0 || this.#stopped) return;
    this.#timer = setTimeout(this.#onIdle, this.#timeoutMs);
  }

  /** A tool call starts: no bound until it (and every other running call) ends. Returns its end; once only. */
  pause(): () => void {
    this.#running++;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.#running--;
      if (this.#running === 0) this.touch();
    };
  }

  /** The attempt is over: no timer now, none later (a tool ending afterwards arms nothing). */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
