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

  /**
   * The inner runner's events, passed on as they come, through an iterator of its own rather
   * than an async generator: a generator layer costs a promise and a resumption per event on
   * top of the inner one's, and every answer's every token goes through here.
   */
  run(input: AgentInput, ctx: AgentContext, signal: AbortSignal): AsyncIterable<AgentEvent> {
    const guard = new RepetitionGuard(this.options);
    const stop = new AbortController();
    const onAbort = () => stop.abort(signal.reason);
    let inner: AsyncIterator<AgentEvent> | undefined;
    /** The loop's error event, passed on after the event that showed the loop. */
    let loopError: AgentEvent | undefined;
    let finished = false;
    // Removing a listener that was never added (an aborted start) or already removed is a no-op.
    const finish = (): void => {
      finished = true;
      signal.removeEventListener('abort', onAbort);
    };
    const done: IteratorReturnResult<undefined> = { value: undefined, done: true };
    /** Ends the inner runner (its finally blocks run) once this iterator is done with it. */
    const closeInner = async (): Promise<IteratorReturnResult<undefined>> => {
      const it = inner;
      inner = undefined;
      await it?.return?.();
      return done;
    };
    const iterator: AsyncIterator<AgentEvent, undefined> = {
      next: async () => {
        if (loopError) {
          // The error goes out first; the inner runner is closed on the next call (or return()).
          const value = loopError;
          loopError = undefined;
          finish();
          return { value, done: false };
        }
        if (finished) return closeInner();
        if (!inner) {
          if (signal.aborted) onAbort();
          else signal.addEventListener('abort', onAbort, { once: true });
          inner = this.inner.run(input, ctx, stop.signal)[Symbol.asyncIterator]();
        }
        let r: IteratorResult<AgentEvent>;
        try {
          r = await inner.next();
        } catch (err) {
          finish();
          inner = undefined;
          throw err;
        }
        if (r.done) {
          finish();
          inner = undefined;
          return done;
        }
        const e = r.value;
        if (e.type === 'text_delta') {
          const loop = guard.push(e.text);
          if (loop) {
            stop.abort(new CodedError('ANSWER_REPEATING', 'the answer is repeating itself'));
            loopError = { type: 'error', code: 'ANSWER_REPEATING', message: REPEATING_NOTE, keepChars: loop.keepChars };
          }
        }
        return { value: e, done: false };
      },
      return: async () => {
        loopError = undefined;
        finish();
        return closeInner();
      },
    };
    return { [Symbol.asyncIterator]: () => iterator };
  }
}
