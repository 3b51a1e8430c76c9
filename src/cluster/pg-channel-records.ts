import pg from 'pg';
import { SHARED_RECORD_MAX_BYTES, SHARED_RECORD_NAME, type SharedRecord } from '../contracts/shared-record.js';
import { CodedError, errorMessage } from '../contracts/errors.js';
import { raceAbort } from '../util/abortable.js';
import { checkOut, type CheckedOut } from './pg-checkout.js';

/**
 * A record's statement not answered by then has failed (a one-row read or upsert takes
 * milliseconds), whatever the caller's signal allows. The timeout is the client's: the
 * connection it ran on is dropped, not reused.
 */
export const RECORD_QUERY_TIMEOUT_MS = 10_000;

function checkName(name: string): void {
  if (!SHARED_RECORD_NAME.test(name))
    throw new CodedError(
      'SHARED_RECORD_INVALID',
      `a shared record's name is 1 to 64 of a-z, 0-9, ".", "_" and "-" (${SHARED_RECORD_NAME}); ${JSON.stringify(name.slice(0, 80))} is not`,
    );
}

function unavailable(err: unknown): CodedError {
  return new CodedError('CLUSTER_UNAVAILABLE', `PostgreSQL: ${errorMessage(err)}`, { cause: err });
}

/**
 * The records channels keep for every instance (ChannelContext.sharedRecord), in the table
 * `channel_records`, keyed by this cluster's namespace, the channel's id and the record's
 * name: clusters that share a schema do not see each other's. Each read and write is one
 * statement, committed before its promise resolves, outside the write-behind queue (a record
 * is not a conversation's state, and a channel must not wait for a turn's commits).
 */
export class PgChannelRecords {
  constructor(
    private readonly pool: pg.Pool,
    private readonly namespace: string,
  ) {}

  /** Channel `channelId`'s record `name`; SHARED_RECORD_INVALID for a name outside SHARED_RECORD_NAME. */
  record(channelId: string, name: string): SharedRecord {
    checkName(name);
    return { read: (signal) => this.read(channelId, name, signal), write: (value, signal) => this.write(channelId, name, value, signal) };
  }

  async read(channelId: string, name: string, signal: AbortSignal): Promise<string | undefined> {
    checkName(name);
    const rows = await this.#query<{ value: string }>(
      'SELECT value FROM channel_records WHERE namespace = $1 AND channel_id = $2 AND name = $3',
      [this.namespace, channelId, name],
      signal,
    );
    return rows[0]?.value;
  }

  /**
   * Replaces the value (an upsert); SHARED_RECORD_INVALID past SHARED_RECORD_MAX_BYTES, before
   * anything is sent. A write stamped earlier than the stored value's is dropped: one given up
   * by its caller may still commit on the server after a newer one, and must not undo it.
   */
  async write(channelId: string, name: string, value: string, signal: AbortSignal): Promise<void> {
    checkName(name);
    const bytes = Buffer.byteLength(value, 'utf8');
    if (bytes > SHARED_RECORD_MAX_BYTES)
      throw new CodedError(
        'SHARED_RECORD_INVALID',
        `a shared record's value is at most ${SHARED_RECORD_MAX_BYTES} bytes of UTF-8; "${name}" was given ${bytes}`,
      );
    await this.#query(
      `INSERT INTO channel_records (namespace, channel_id, name, value, updated_at) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (namespace, channel_id, name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at
       WHERE channel_records.updated_at <= excluded.updated_at`,
      [this.namespace, channelId, name, value, Date.now()],
      signal,
    );
  }

  /**
   * One statement on a client of its own, given up as soon as `signal` aborts (rejecting with
   * its reason). A client that comes after that is handed back unused, so a write given up
   * while PostgreSQL could not be reached is never made later, over a newer one; a statement
   * given up while it ran has its connection dropped (it may still be running).
   */
  async #query<R extends pg.QueryResultRow>(text: string, values: unknown[], signal: AbortSignal): Promise<R[]> {
    signal.throwIfAborted();
    const pending = checkOut(this.pool);
    let out: CheckedOut;
    try {
      out = await raceAbort(pending, signal);
    } catch (err) {
      pending.then(
        (late) => late.release(),
        () => {},
      );
      throw signal.aborted ? signal.reason : unavailable(err);
    }
    try {
      // pg reads a query's own `query_timeout` (client.js), which its types do not list.
      const query = out.client.query<R>({ text, values, query_timeout: RECORD_QUERY_TIMEOUT_MS } as pg.QueryConfig);
      return (await raceAbort(query, signal)).rows;
    } catch (err) {
      // A refusal PostgreSQL answered leaves the connection as it was; anything else drops it.
      out.release(err instanceof pg.DatabaseError ? undefined : err);
      throw signal.aborted ? signal.reason : unavailable(err);
    } finally {
      out.release();
    }
  }
}
