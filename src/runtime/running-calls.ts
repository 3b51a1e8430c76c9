import { CodedError } from '../contracts/errors.js';

/** The reason a call stopped by `/stop tool` carries (TOOL_CALL_CANCELLED); the model reads "cancelled by the user". */
export class CancelledByUser extends CodedError {
  constructor() {
    super('TOOL_CALL_CANCELLED');
    this.name = 'CancelledByUser';
  }
}

/**
 * The tool calls running now, per conversation scope, so `/stop tool` can cancel just the
 * call (its turn goes on) while `/stop` cancels the whole turn.
 */
export class RunningCalls {
  readonly #byScope = new Map<string, Set<AbortController>>();

  /** Records a call; the returned function forgets it (call it when the call ends). */
  track(scope: string, call: AbortController): () => void {
    let set = this.#byScope.get(scope);
    if (!set) this.#byScope.set(scope, (set = new Set()));
    set.add(call);
    return () => {
      set.delete(call);
      if (set.size === 0 && this.#byScope.get(scope) === set) this.#byScope.delete(scope);
    };
  }

  /** Cancels every running call of a scope; returns how many there were. */
  cancel(scope: string): number {
    const set = this.#byScope.get(scope);
    if (!set) return 0;
    for (const c of set) c.abort(new CancelledByUser());
    return set.size;
  }
}
