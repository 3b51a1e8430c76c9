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
}
