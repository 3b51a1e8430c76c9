/**
 * Values read ahead for the turns that start in the microtasks right after (see
 * `readTurnStartsAlongside`): each stands in for its turn's own read once, and all are
 * forgotten when the event loop next turns, since a turn that starts later must read again.
 */
export class ThisTurnReads<V> {
  readonly #reads = new Map<string, V>();
  #clearing = false;

  put(key: string, value: V): void {
    this.#reads.set(key, value);
    if (this.#clearing) return;
    this.#clearing = true;
    setImmediate(() => {
      this.#clearing = false;
      this.#reads.clear();
    });
  }

  /** What was read for `key` in this turn of the loop (used once), or undefined. */
  take(key: string): V | undefined {
    const value = this.#reads.get(key);
    if (value !== undefined) this.#reads.delete(key);
    return value;
  }

  /** Drops what was read for `key`: something newer replaced it. */
  forget(key: string): void {
    this.#reads.delete(key);
  }
}
