import type { ErrorCode } from '../contracts/errors.js';
import { Attempt } from './attempt.js';
import type { AgentEvent } from '../contracts/agent-events.js';
import type { AgentContext, AgentInput, AgentRunner } from '../contracts/agent-runner.js';

/** Failures that move a turn to the next model, when nothing is visible yet. */
const FAILOVER: ReadonlySet<ErrorCode> = new Set(['PROVIDER_UNAVAILABLE', 'PROVIDER_FAILED', 'PROVIDER_TIMEOUT', 'PROVIDER_RATE_LIMITED']);

export interface CooldownState {
  model: string;
  until: string;
  failures: number;
}

/** Models that failed recently: skipped until their cooldown ends; the cooldown doubles while they keep failing. */
export class ModelCooldowns {
  readonly #state = new Map<string, { untilMs: number; failures: number }>();

  constructor(private readonly baseMs: () => number) {}

  cooling(model: string, nowMs = Date.now()): boolean {
    const s = this.#state.get(model);
    return s !== undefined && s.untilMs > nowMs;
  }

  failed(model: string, nowMs = Date.now()): void {
    const failures = (this.#state.get(model)?.failures ?? 0) + 1;
    this.#state.set(model, { failures, untilMs: nowMs + this.baseMs() * 2 ** (failures - 1) });
  }

  succeeded(model: string): void {
    this.#state.delete(model);
  }

  snapshot(nowMs = Date.now()): CooldownState[] {
    return [...this.#state]
      .filter(([, s]) => s.untilMs > nowMs)
      .map(([model, s]) => ({ model, until: new Date(s.untilMs).toISOString(), failures: s.failures }));
  }
}

/** One model a turn may use: "provider:model", and the runner that speaks to it. */
export interface Candidate {
  key: string;
  model: string;
  /** `last` says no other model follows: the runner may retry on its own. */
  runner(last: boolean): AgentRunner;
}

/**
 * Tries the conversation's model, then `fallback_models` in order. A model that fails
 * before showing anything (connection refused, 5xx, 429, timeout) cools down and the turn
 * moves on, leaving none of its events behind; once text or a tool call is visible, a
 * failure ends the turn as usual. When every model is
 * cooling, the primary is tried anyway.
 */
export class FailoverRunner implements AgentRunner {
  readonly name = 'failover';

  constructor(
    private readonly candidates: (input: AgentInput) => readonly Candidate[],
    readonly cooldowns: ModelCooldowns,
    private readonly on: FailoverHooks = {},
  ) {}

  run(input: AgentInput, ctx: AgentContext, signal: AbortSignal): AsyncIterable<AgentEvent> {
    const all = this.candidates(input);
    // One model is tried whether it cools down or not; with nothing to fail over to, its
    // events go through an iterator of its own (no generator layer: a promise per event).
    if (all.length === 1) {
      const only = all[0]!;
      return { [Symbol.asyncIterator]: () => new OnlyModelRun(only, this.cooldowns, this.on, input, ctx, signal) };
    }
    return this.#tryInTurn(all, input, ctx, signal);
  }

  async *#tryInTurn(all: readonly Candidate[], input: AgentInput, ctx: AgentContext, signal: AbortSignal): AsyncIterable<AgentEvent> {
    const ready = all.filter((c) => !this.cooldowns.cooling(c.key));
    const order = ready.length ? ready : all.slice(0, 1);
    for (const [i, c] of order.entries()) {
      const last = i === order.length - 1;
      // Text and tool calls are visible progress: after them, no failover (tools would run twice).
      const shown = new Attempt();
      let failedBeforeText = false;
      for await (const e of startAttempt(c, last, input, ctx, signal)) {
        if (failedEarly(c, shown, e, this.cooldowns) && !last) {
          failedBeforeText = true;
          this.on.failedOver?.(c.key);
          break;
        }
        // A loop, not yield* over the array: yield* on a sync iterable in an async generator
        // wraps it in an async iterator, a promise and a microtask per event.
        for (const out of passOn(c, shown, e, this.cooldowns, this.on)) yield out;
        if (e.type === 'done' || e.type === 'error' || e.type === 'cancelled') return;
      }
      if (!failedBeforeText) return;
    }
  }
}

type FailoverHooks = { served?(key: string): void; failedOver?(from: string): void };

/** Starts candidate `c`'s attempt, telling the turn which model it is. */
function startAttempt(c: Candidate, last: boolean, input: AgentInput, ctx: AgentContext, signal: AbortSignal): AsyncIterable<AgentEvent> {
  // The bare model name, as /model, /status and /admin show it; cooldowns keep the provider too.
  ctx.onModel?.(c.model);
  return c.runner(last).run({ ...input, model: c.model }, ctx, signal);
}

/** A failure worth failing over for, before the attempt showed anything: the model cools down. */
function failedEarly(c: Candidate, shown: Attempt, e: AgentEvent, cooldowns: ModelCooldowns): boolean {
  if (e.type !== 'error' || !FAILOVER.has(e.code) || shown.visible) return false;
  cooldowns.failed(c.key);
  return true;
}

/** What the attempt passes on for `e`; a `done` marks the model served and names it. */
function passOn(c: Candidate, shown: Attempt, e: AgentEvent, cooldowns: ModelCooldowns, on: FailoverHooks): AgentEvent[] {
  if (e.type !== 'done') return shown.take(e);
  cooldowns.succeeded(c.key);
  on.served?.(c.key);
  return shown.take({ ...e, model: c.key });
}

/**
 * The one model of a turn without fallbacks, as `FailoverRunner` runs its last candidate:
 * the model told first, a failure before any text cools it down, invisible events held until
 * text shows (and dropped with a failure), `done` names the model. The inner runner is
 * closed when the turn's terminal event has been passed on, or when the consumer stops.
 *
 * `next` is not an async function: a turn spends its whole answer waiting in it, and a
 * suspended async frame (its generator, registers, promise and the two closures of its
 * await) is kept by every running turn, where a pending `then` with this object's two
 * handlers keeps one reaction and one promise.
 */
class OnlyModelRun implements AsyncIterator<AgentEvent, undefined> {
  readonly #shown = new Attempt();
  #inner: AsyncIterator<AgentEvent> | undefined;
  /** Events `Attempt` released together, passed on one per call. */
  #queue: AgentEvent[] = [];
  #ended = false;

  constructor(
    private readonly c: Candidate,
    private readonly cooldowns: ModelCooldowns,
    private readonly on: FailoverHooks,
    private readonly input: AgentInput,
    private readonly ctx: AgentContext,
    private readonly signal: AbortSignal,
  ) {}

  next(): Promise<IteratorResult<AgentEvent, undefined>> {
    const queued = this.#queue.shift();
    if (queued) return Promise.resolve({ value: queued, done: false });
    if (this.#ended) return this.return();
    let pending: Promise<IteratorResult<AgentEvent>>;
    try {
      this.#inner ??= startAttempt(this.c, true, this.input, this.ctx, this.signal)[Symbol.asyncIterator]();
      pending = this.#inner.next();
    } catch (err) {
      return this.#failed(err);
    }
    return pending.then(this.#onResult, this.#onFailure);
  }

  /** One event of the inner runner: passed on (what `Attempt` releases), or the next asked for. */
  readonly #onResult = (r: IteratorResult<AgentEvent>): IteratorResult<AgentEvent, undefined> | Promise<IteratorResult<AgentEvent, undefined>> => {
    if (r.done) {
      this.#drop();
      return this.next();
    }
    const e = r.value;
    failedEarly(this.c, this.#shown, e, this.cooldowns);
    if (e.type === 'done' || e.type === 'error' || e.type === 'cancelled') this.#ended = true;
    this.#queue = passOn(this.c, this.#shown, e, this.cooldowns, this.on);
    const out = this.#queue.shift();
    return out ? { value: out, done: false } : this.next();
  };

  readonly #onFailure = (err: unknown): never => {
    this.#drop();
    throw err;
  };

  /** A failure starting or asking the inner runner: the rejection an async `next` would give. */
  #failed(err: unknown): Promise<never> {
    this.#drop();
    return Promise.reject(err as Error);
  }

  /** The inner runner is done (it ended or failed): nothing more comes from it. */
  #drop(): void {
    this.#ended = true;
    this.#inner = undefined;
  }

  async return(): Promise<IteratorReturnResult<undefined>> {
    this.#ended = true;
    this.#queue = [];
    const inner = this.#inner;
    this.#inner = undefined;
    await inner?.return?.();
    return { value: undefined, done: true };
  }
}
