import { CodedError } from '../contracts/errors.js';

/**
 * The reason a finished reply's own stop carries when it ends what it left in flight (typing
 * requests never awaited): one shared coded error, made once, because `abort()` without a
 * reason builds a DOMException with a stack each time.
 */
export const TURN_ENDED = new CodedError('TURN_ENDED');

/** How long a turn may take to show text before the typing indicator goes up. */
export const TYPING_GRACE_MS = 300;

/**
 * One reply's typing indicator: `tick` runs TYPING_GRACE_MS after the turn starts and then
 * every `refreshMs`, until it returns false or `stop()`. An answer that shows up at once needs
 * no indicator: that would be one platform request per reply spent on nothing the user sees.
 */
export class TypingIndicator {
  #timer: NodeJS.Timeout | undefined;

  constructor(refreshMs: number, tick: () => boolean) {
    const run = () => {
      this.#timer = tick() ? setTimeout(run, refreshMs) : undefined;
    };
    this.#timer = setTimeout(run, TYPING_GRACE_MS);
  }

  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #inFlight = 0;

  /**
   * Counts a typing request until it settles. Nobody awaits it and its failure changes
   * nothing, so it is absorbed here; the reply cuts what is still in flight when it ends.
   */
  track(request: Promise<unknown>): void {
    this.#inFlight++;
    request.catch(() => {}).finally(() => this.#inFlight--);
  }

  /** Typing requests sent and not settled yet. */
  get inFlight(): number {
    return this.#inFlight;
  }
}
