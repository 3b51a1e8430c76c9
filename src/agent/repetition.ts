import type { AgentEvent } from '../contracts/agent-events.js';
import type { AgentContext, AgentInput, AgentRunner } from '../contracts/agent-runner.js';
import { userText } from '../contracts/errors.js';

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
    return new GuardedRun(this.inner, new RepetitionGuard(this.options), input, ctx, signal);
  }
}

/**
 * One turn through the guard. A class, not closures over the turn, and `next` is not an async
 * function: a turn spends its whole answer waiting in `next`, and a suspended async frame (its
 * generator, registers, promise and the two closures of its await) is kept by every running
 * turn, where a pending `then` with this object's two handlers keeps one reaction and one promise.
 *
 * The inner runner gets the turn's own signal, and a loop stops it by closing it (`return()`,
 * at once, while it waits at the yield that showed the loop), which every runner honours as a
 * consumer that stops early: a controller of the guard's own, with a listener on the turn's
 * signal to pass its abort on, was an `AbortSignal` and its listener map kept by every running
 * turn (about 0.4 KB) for the rare answer that loops.
 */
class GuardedRun implements AsyncIterator<AgentEvent, undefined>, AsyncIterable<AgentEvent> {
  #inner: AsyncIterator<AgentEvent> | undefined;
  /** The loop's error event, passed on after the event that showed the loop. */
  #loopError: AgentEvent | undefined;
  /** The inner runner's close, started when the loop showed (`#inner` is gone then); awaited by `#closeInner`. */
  #closing: Promise<unknown> | undefined;
  #finished = false;

  constructor(
    private readonly runner: AgentRunner,
    private readonly guard: RepetitionGuard,
    private readonly input: AgentInput,
    private readonly ctx: AgentContext,
    private readonly signal: AbortSignal,
  ) {}

  [Symbol.asyncIterator](): AsyncIterator<AgentEvent, undefined> {
    return this;
  }

  next(): Promise<IteratorResult<AgentEvent, undefined>> {
    if (this.#loopError) {
      // The error goes out first; the inner runner's close is awaited on the next call (or return()).
      const value = this.#loopError;
      this.#loopError = undefined;
      this.#finished = true;
      return Promise.resolve({ value, done: false });
    }
    if (this.#finished) return this.#closeInner();
    let pending: Promise<IteratorResult<AgentEvent>>;
    try {
      this.#inner ??= this.runner.run(this.input, this.ctx, this.signal)[Symbol.asyncIterator]();
      pending = this.#inner.next();
    } catch (err) {
      this.#drop();
      return Promise.reject(err as Error);
    }
    return pending.then(this.#onResult, this.#onFailure);
  }

  readonly #onResult = (r: IteratorResult<AgentEvent>): IteratorResult<AgentEvent, undefined> => {
    if (r.done) {
      this.#drop();
      return DONE;
    }
    const e = r.value;
    if (e.type === 'text_delta') {
      const loop = this.guard.push(e.text);
      if (loop) {
        // The model stops now, not when the consumer next asks: its close runs its finally
        // blocks (a provider's aborts the request). A failure there is the consumer's to see,
        // from `#closeInner`; until then it is held, not left unhandled.
        this.#closing = this.#inner?.return?.();
        this.#closing?.catch(() => {});
        this.#inner = undefined;
        this.#loopError = { type: 'error', code: 'ANSWER_REPEATING', message: REPEATING_NOTE, keepChars: loop.keepChars };
      }
    }
    return { value: e, done: false };
  };

  readonly #onFailure = (err: unknown): never => {
    this.#drop();
    throw err;
  };

  return(): Promise<IteratorReturnResult<undefined>> {
    this.#loopError = undefined;
    this.#finished = true;
    return this.#closeInner();
  }

  /** The inner runner ended or failed: nothing more comes from it, nothing to close. */
  #drop(): void {
    this.#finished = true;
    this.#inner = undefined;
  }

  /** Ends the inner runner (its finally blocks run) once this iterator is done with it. */
  async #closeInner(): Promise<IteratorReturnResult<undefined>> {
    const closing = this.#closing ?? this.#inner?.return?.();
    this.#inner = undefined;
    this.#closing = undefined;
    await closing;
    return DONE;
  }
}

const DONE: IteratorReturnResult<undefined> = { value: undefined, done: true };
