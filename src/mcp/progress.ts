/** Characters of one progress line kept; the rest of a long message is dropped. */
export const MAX_PROGRESS_CHARS = 200;
/** At most one progress line per call this often; the latest wins in between. */
export const PROGRESS_INTERVAL_MS = 500;

/**
 * Coalesces a call's progress notifications: a server may send thousands a second, and each
 * line becomes an event that travels to the chat. The first goes out at once, later ones at
 * most every `intervalMs` (only the latest kept), each cut to `maxChars`. `close()` sends the
 * pending line and stops the timer.
 */
export class ProgressCoalescer {
  readonly #emit: (line: string) => void;
  readonly #intervalMs: number;
  readonly #maxChars: number;
  #pending: string | undefined;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(emit: (line: string) => void, o: { intervalMs?: number; maxChars?: number } = {}) {
    this.#emit = emit;
    this.#intervalMs = o.intervalMs ?? PROGRESS_INTERVAL_MS;
    this.#maxChars = o.maxChars ?? MAX_PROGRESS_CHARS;
  }

  push(line: string): void {
    if (this.#closed) return;
    const cut = line.length > this.#maxChars ? `${line.slice(0, this.#maxChars)}…` : line;
    if (this.#timer) {
      this.#pending = cut;
      return;
    }
    this.#emit(cut);
    this.#arm();
  }

  #arm(): void {
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      const line = this.#pending;
      this.#pending = undefined;
      if (line === undefined) return;
      this.#emit(line);
      this.#arm();
    }, this.#intervalMs);
    this.#timer.unref?.();
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const line = this.#pending;
    this.#pending = undefined;
    if (line !== undefined) this.#emit(line);
  }
}
