const OPEN = '<think>';
const CLOSE = '</think>';

export interface Piece {
  kind: 'text' | 'reasoning';
  text: string;
}

/**
 * Splits `<think>…</think>` reasoning out of streamed text. Tags may arrive split across
 * chunks ("<thi" + "nk>"), so a possible tag prefix at the end of a chunk is held back until
 * the next one decides it.
 */
export class ThinkSplitter {
  #buf = '';
  #inThink = false;

  push(chunk: string): Piece[] {
    this.#buf += chunk;
    const out: Piece[] = [];
    for (;;) {
      const tag = this.#inThink ? CLOSE : OPEN;
      const i = this.#buf.indexOf(tag);
      if (i >= 0) {
        this.#emit(out, this.#buf.slice(0, i));
        this.#buf = this.#buf.slice(i + tag.length);
        this.#inThink = !this.#inThink;
        continue;
      }
      const hold = partialSuffix(this.#buf, tag);
      this.#emit(out, this.#buf.slice(0, this.#buf.length - hold));
      this.#buf = this.#buf.slice(this.#buf.length - hold);
      return out;
    }
  }

  /** What is left at the end of the stream. */
  flush(): Piece[] {
    const out: Piece[] = [];
    this.#emit(out, this.#buf);
    this.#buf = '';
    return out;
  }

  #emit(out: Piece[], text: string): void {
    if (!text) return;
    const kind = this.#inThink ? 'reasoning' : 'text';
    const last = out.at(-1);
    if (last?.kind === kind) last.text += text;
    else out.push({ kind, text });
  }
}

/** Length of the longest suffix of `s` that is a proper prefix of `tag`. */
function partialSuffix(s: string, tag: string): number {
  for (let n = Math.min(tag.length - 1, s.length); n > 0; n--) if (tag.startsWith(s.slice(-n))) return n;
  return 0;
}
