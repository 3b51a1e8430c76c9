/**
 * Notices an answer that degenerates into a loop: the tail of the text is one chunk
 * (between `minPeriod` and `maxPeriod` characters) repeated at least `repeats` times.
 * Checked every `stepChars` of new text, so the cost stays small.
 */
export class RepetitionGuard {
  #text = '';
  #checkedAt = 0;

  constructor(
    private readonly minPeriod = 8,
    private readonly maxPeriod = 300,
    private readonly repeats = 6,
    private readonly stepChars = 64,
  ) {}

  /** Adds text; true once the answer is repeating itself. */
  push(text: string): boolean {
    this.#text += text;
    if (this.#text.length - this.#checkedAt < this.stepChars) return false;
    this.#checkedAt = this.#text.length;
    const t = this.#text;
    for (let p = this.minPeriod; p <= this.maxPeriod && p * this.repeats <= t.length; p++) {
      const unit = t.slice(t.length - p);
      if (!unit.trim()) continue;
      let k = 1;
      while (k < this.repeats && t.slice(t.length - p * (k + 1), t.length - p * k) === unit) k++;
      if (k >= this.repeats) return true;
    }
    if (t.length > 8 * this.maxPeriod * this.repeats) {
      this.#text = t.slice(t.length - this.maxPeriod * this.repeats * 2);
      this.#checkedAt = this.#text.length;
    }
    return false;
  }
}
