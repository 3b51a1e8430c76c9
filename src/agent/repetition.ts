import type { AgentEvent } from '../contracts/agent-events.js';
import type { AgentContext, AgentInput, AgentRunner } from '../contracts/agent-runner.js';
import { CodedError, userText } from '../contracts/errors.js';

/** Where a loop was found, in characters of the answer's text. */
export interface LoopFound {
  /** Where the repeating stretch begins. */
  startChars: number;
  /** What history keeps: the text before the loop and one copy of the repeated part. */
  keepChars: number;
  /** The length of the repeated unit. */
  periodChars: number;
}

export interface RepetitionGuardOptions {
  /** The longest repeated unit looked for (a paragraph). */
  maxPeriodChars: number;
  /** A loop repeats its unit at least this often in a row... */
  minRepeats: number;
  /** ...over at least this many characters, when the unit holds a letter or digit... */
  minLoopChars: number;
  /** ...or this many, for units of symbols and spaces only (separator lines, table rules). */
  minSymbolLoopChars: number;
  /** Checked every this many new characters. */
  stepChars: number;
}

const DEFAULTS: RepetitionGuardOptions = { maxPeriodChars: 400, minRepeats: 5, minLoopChars: 600, minSymbolLoopChars: 1500, stepChars: 16 };

/**
 * Notices an answer that degenerates into a loop: the tail of the text is one unit repeated
 * verbatim, many times, over a long stretch. Legitimate repetitive answers (a phrase said
 * a dozen times in a paragraph, separator lines, long tables, CSV, code listings of similar
 * lines) never repeat a long stretch verbatim at the tail, so they pass; a model stuck
 * repeating a sentence or a paragraph is caught within 2,000 characters of where it began.
 */
export class RepetitionGuard {
  readonly #o: RepetitionGuardOptions;
  /** The newest characters; `#dropped` older ones are forgotten. */
  #text = '';
  #dropped = 0;
  #checkedAt = 0;

  constructor(options: Partial<RepetitionGuardOptions> = {}) {
    this.#o = { ...DEFAULTS, ...options };
  }

  /** Adds text; returns where the loop began once the answer is repeating itself. */
  push(text: string): LoopFound | undefined {
    this.#text += text;
    const total = this.#dropped + this.#text.length;
    if (total - this.#checkedAt < this.#o.stepChars) return undefined;
    this.#checkedAt = total;
    const found = this.#scan();
    // Only the tail matters: a loop long enough to count fits in this window.
    const window = 2 * Math.max(this.#o.minSymbolLoopChars, this.#o.maxPeriodChars * this.#o.minRepeats);
    if (this.#text.length > 2 * window) {
      this.#dropped += this.#text.length - window;
      this.#text = this.#text.slice(-window);
    }
    return found;
  }

  #scan(): LoopFound | undefined {
    const t = this.#text;
    const n = t.length;
    const o = this.#o;
    for (let p = 1; p <= o.maxPeriodChars && p * o.minRepeats <= n; p++) {
      // The longest tail with period p: t[k] === t[k + p] for every k in it.
      let i = n - 1 - p;
      while (i >= 0 && t.charCodeAt(i) === t.charCodeAt(i + p)) i--;
      const length = n - 1 - i;
      if (length < p * o.minRepeats) continue;
      const unit = t.slice(n - p);
      if (length < (/[\p{L}\p{N}]/u.test(unit) ? o.minLoopChars : o.minSymbolLoopChars)) continue;
      const start = this.#dropped + n - length;
      return { startChars: start, keepChars: start + p, periodChars: p };
    }
    return undefined;
  }
}

export const REPEATING_NOTE = userText('ANSWER_REPEATING');

/**
 * Wraps any runner with the repetition guard. When the answer loops, the model is stopped,
 * the user keeps what arrived plus a note, and the error event's `keepChars` tells the
 * reducer to store the text only up to where the loop began, so history never feeds the
 * loop back to the model.
 */
export class RepetitionGuardedRunner implements AgentRunner {
  constructor(
    private readonly inner: AgentRunner,
    private readonly options: Partial<RepetitionGuardOptions> = {},
  ) {}

  get name(): string {
    return this.inner.name;
  }

  async *run(input: AgentInput, ctx: AgentContext, signal: AbortSignal): AsyncIterable<AgentEvent> {
    const guard = new RepetitionGuard(this.options);
    const stop = new AbortController();
    const onAbort = () => stop.abort(signal.reason);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    try {
      for await (const e of this.inner.run(input, ctx, stop.signal)) {
        yield e;
        if (e.type !== 'text_delta') continue;
        const loop = guard.push(e.text);
        if (loop) {
          stop.abort(new CodedError('ANSWER_REPEATING', 'the answer is repeating itself'));
          yield { type: 'error', code: 'ANSWER_REPEATING', message: REPEATING_NOTE, keepChars: loop.keepChars };
          return;
        }
      }
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }
}
