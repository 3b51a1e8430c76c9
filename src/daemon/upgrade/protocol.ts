/**
 * What the old and the new process of an upgrade tell each other over the IPC channel the
 * old one opens when it starts the new one (`channeld upgrade`, SIGUSR2). Only these two
 * processes speak it; still, every message is checked and bounded before it is used.
 *
 * new → old: `take` (before a channel's listener starts: stop yours and hand over its
 * session), `ready` (started; take over), `failed` (the start failed, and why).
 * old → new: `taken` (the listener stopped, its state), `frozen` (the old one takes no
 * message and starts no turn any more; `busy` are the scopes whose turns still run there;
 * a list longer than one message may carry goes ahead in `busy` parts, and `frozen` then
 * says how many: see frozenMessages),
 * `restore` (the state of a listener that ran in both, sent just before the old one stops
 * it: web chat's tabs; and once more, before `done`, with what the turns still running there
 * added to it since), `done` (those turns ended), `abort` (the upgrade failed: this process
 * serves on and stops the new one; the channel's close that follows is not this one going
 * away, so the new one takes over nothing).
 */
export type ToOld = { t: 'take'; channel: string } | { t: 'ready' } | { t: 'failed'; reason: string };
export type ToNew =
  | { t: 'taken'; channel: string; state?: unknown }
  | { t: 'busy'; scopes: string[] }
  | { t: 'frozen'; busy: string[] }
  | { t: 'frozen'; parts: number }
  | { t: 'restore'; channel: string; state: unknown }
  | { t: 'done' }
  | { t: 'abort' };

/** A channel's handed-over state is a few KiB (a gateway session per shard); anything larger is dropped. */
export const MAX_STATE_BYTES = 64 * 1024;
/**
 * Scopes named in one `frozen` or `busy` message. Running turns are bounded by max_in_flight,
 * but a freeze whose commit failed lists every conversation with an unfinished item
 * (freezeFor), which can be more: those go in several messages.
 */
export const MAX_BUSY_SCOPES = 10_000;
/** A scope's length in those messages. */
export const MAX_SCOPE_CHARS = 1000;
/** `busy` parts one freeze may send (a million scopes); the new process takes no more. */
export const MAX_BUSY_PARTS = 100;
/** Why the new process failed, as the CLI prints it. */
export const MAX_REASON_CHARS = 2000;

const isString = (v: unknown, max: number): v is string => typeof v === 'string' && v.length <= max;

const isScopes = (v: unknown): v is string[] => Array.isArray(v) && v.length <= MAX_BUSY_SCOPES && v.every((s) => isString(s, MAX_SCOPE_CHARS));

/**
 * What tells the new process the old one froze, with `busy` (the scopes whose turns still
 * run there): one `frozen` with the list when it fits in one message, else `busy` parts of
 * at most MAX_BUSY_SCOPES each and a `frozen` that counts them. The channel keeps their
 * order, so the new process has the whole list when `frozen` arrives. Undefined when the list
 * is past what the new process takes (MAX_BUSY_PARTS parts, a scope over MAX_SCOPE_CHARS):
 * then nothing is sent, and the new process holds every conversation until this one is gone.
 */
export function frozenMessages(busy: readonly string[]): ToNew[] | undefined {
  // What the new process would refuse is not sent at all (it waits until this one is gone, as for a `frozen` lost).
  if (busy.length > MAX_BUSY_PARTS * MAX_BUSY_SCOPES || busy.some((s) => s.length > MAX_SCOPE_CHARS)) return undefined;
  if (busy.length <= MAX_BUSY_SCOPES) return [{ t: 'frozen', busy: [...busy] }];
  const parts: ToNew[] = [];
  for (let i = 0; i < busy.length; i += MAX_BUSY_SCOPES) parts.push({ t: 'busy', scopes: busy.slice(i, i + MAX_BUSY_SCOPES) });
  return [...parts, { t: 'frozen', parts: parts.length }];
}

/** A handed-over state, or undefined when it is too large to take. */
export function boundedState(state: unknown): unknown {
  if (state === undefined) return undefined;
  const json = JSON.stringify(state);
  return json !== undefined && Buffer.byteLength(json) <= MAX_STATE_BYTES ? state : undefined;
}

export function parseToOld(m: unknown): ToOld | undefined {
  const v = m as Record<string, unknown> | null;
  if (!v || typeof v !== 'object') return undefined;
  if (v.t === 'take' && isString(v.channel, 200)) return { t: 'take', channel: v.channel };
  if (v.t === 'ready') return { t: 'ready' };
  if (v.t === 'failed' && typeof v.reason === 'string') return { t: 'failed', reason: v.reason.slice(0, MAX_REASON_CHARS) };
  return undefined;
}

export function parseToNew(m: unknown): ToNew | undefined {
  const v = m as Record<string, unknown> | null;
  if (!v || typeof v !== 'object') return undefined;
  if (v.t === 'taken' && isString(v.channel, 200)) return { t: 'taken', channel: v.channel, state: boundedState(v.state) };
  if (v.t === 'busy' && isScopes(v.scopes)) return { t: 'busy', scopes: v.scopes };
  // Either the whole list, or the count of the `busy` parts sent before: never both, so an
  // older new process, which knows no parts, drops a `frozen` that lacks some of the list.
  if (v.t === 'frozen' && v.parts === undefined && isScopes(v.busy)) return { t: 'frozen', busy: v.busy };
  if (v.t === 'frozen' && v.busy === undefined && Number.isSafeInteger(v.parts) && (v.parts as number) > 0 && (v.parts as number) <= MAX_BUSY_PARTS)
    return { t: 'frozen', parts: v.parts as number };
  if (v.t === 'restore' && isString(v.channel, 200)) {
    const state = boundedState(v.state);
    return state === undefined ? undefined : { t: 'restore', channel: v.channel, state };
  }
  if (v.t === 'done') return { t: 'done' };
  if (v.t === 'abort') return { t: 'abort' };
  return undefined;
}
