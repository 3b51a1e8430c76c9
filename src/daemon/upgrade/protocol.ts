/**
 * What the old and the new process of an upgrade tell each other over the IPC channel the
 * old one opens when it starts the new one (`channeld upgrade`, SIGUSR2). Only these two
 * processes speak it; still, every message is checked and bounded before it is used.
 *
 * new → old: `take` (before a channel's listener starts: stop yours and hand over its
 * session), `ready` (started; take over), `failed` (the start failed, and why).
 * old → new: `taken` (the listener stopped, its state), `frozen` (the old one takes no
 * message and starts no turn any more; `busy` are the scopes whose turns still run there),
 * `restore` (the state of a listener that ran in both, sent just before the old one stops
 * it: web chat's tabs; and once more, before `done`, with what the turns still running there
 * added to it since), `done` (those turns ended), `abort` (the upgrade failed: this process
 * serves on and stops the new one; the channel's close that follows is not this one going
 * away, so the new one takes over nothing).
 */
export type ToOld = { t: 'take'; channel: string } | { t: 'ready' } | { t: 'failed'; reason: string };
export type ToNew =
  | { t: 'taken'; channel: string; state?: unknown }
  | { t: 'frozen'; busy: string[] }
  | { t: 'restore'; channel: string; state: unknown }
  | { t: 'done' }
  | { t: 'abort' };

/** A channel's handed-over state is a few KiB (a gateway session per shard); anything larger is dropped. */
export const MAX_STATE_BYTES = 64 * 1024;
/** Scopes named in `frozen` (a turn each: bounded by max_in_flight in practice). */
export const MAX_BUSY_SCOPES = 10_000;
/** Why the new process failed, as the CLI prints it. */
export const MAX_REASON_CHARS = 2000;

const isString = (v: unknown, max: number): v is string => typeof v === 'string' && v.length <= max;

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
  if (v.t === 'frozen' && Array.isArray(v.busy) && v.busy.length <= MAX_BUSY_SCOPES && v.busy.every((s) => isString(s, 1000)))
    return { t: 'frozen', busy: v.busy as string[] };
  if (v.t === 'restore' && isString(v.channel, 200)) {
    const state = boundedState(v.state);
    return state === undefined ? undefined : { t: 'restore', channel: v.channel, state };
  }
  if (v.t === 'done') return { t: 'done' };
  if (v.t === 'abort') return { t: 'abort' };
  return undefined;
}
