import { CodedError } from '../contracts/errors.js';
import type { Logger } from '../observe/logger.js';
import { sleep } from '../util/abortable.js';

const FIRST_RETRY_MS = 200;
const MAX_RETRY_MS = 5_000;
/**
 * SQLSTATEs of a server that cannot serve now: connection exceptions, a shutdown or a
 * restart in progress, a query cancelled (statement timeout), out of resources, and a
 * conflict worth retrying. A dropped database (57P04) is not among them.
 */
const TRANSIENT_SQLSTATE = /^(08|57P0[1-3]|57014|53|40001|40P01)/;

/**
 * A store that cannot answer now, as against one that refuses the query: a coded retryable
 * failure whose cause, if PostgreSQL answered at all, names a transient condition. (A missing
 * table or a permission error is retryable by code but would be waited on forever.)
 */
function transient(err: unknown): boolean {
  if (!(err instanceof CodedError) || !err.retryable) return false;
  // PostgreSQL's own answer (pg's DatabaseError carries its severity); a socket error's code
  // (ECONNRESET, EPIPE) is no SQLSTATE.
  const cause = err.cause as { code?: unknown; severity?: unknown } | undefined;
  if (typeof cause?.severity !== 'string' || typeof cause.code !== 'string') return true;
  return TRANSIENT_SQLSTATE.test(cause.code);
}

/**
 * Makes a conversation's shared state current before its turn (cluster mode reads it from
 * PostgreSQL), waiting out a store that cannot answer now: a turn that failed here would end
 * before its reply exists, unanswered and acknowledged, so it waits instead, as its replies
 * wait for writes. Resolves false when `signal` aborts first (the turn goes back unfinished
 * or ends cancelled, by why); any other failure rejects (the turn fails with a readable error).
 */
export async function prepareTurn(prepare: () => Promise<void>, signal: AbortSignal, log: Logger, scope: string): Promise<boolean> {
  let waitMs = FIRST_RETRY_MS;
  for (let attempt = 1; ; attempt++) {
    try {
      await prepare();
      if (attempt > 1) log.info({ scope, attempts: attempt }, "the conversation's state could be read again: its turn starts");
      return !signal.aborted;
    } catch (err) {
      if (!transient(err)) throw err;
      if (attempt === 1) log.warn({ err, scope }, "the conversation's state cannot be read now: its turn waits for the store");
    }
    await sleep(waitMs, signal);
    if (signal.aborted) return false;
    waitMs = Math.min(MAX_RETRY_MS, waitMs * 2);
  }
}
