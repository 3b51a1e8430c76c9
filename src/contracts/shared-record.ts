/** The most a SharedRecord's value holds, in bytes of UTF-8. */
export const SHARED_RECORD_MAX_BYTES = 64 * 1024;

/** A SharedRecord's name: 1 to 64 lowercase letters, digits, `.`, `_` and `-`, starting with a letter or digit. */
export const SHARED_RECORD_NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;

/**
 * One record of a channel's shared by every instance of a cluster (ChannelContext.sharedRecord;
 * PostgreSQL, keyed by the cluster's namespace, the channel's id and the record's name), such
 * as the conversations a catch-up reads that the platform does not list. A write replaces the
 * value, the last one wins (nothing is merged: a channel that keeps a list merges what it read
 * itself). Bounded: the name matches SHARED_RECORD_NAME and a value is at most
 * SHARED_RECORD_MAX_BYTES of UTF-8; anything else is refused (SHARED_RECORD_INVALID). Both
 * calls stop when `signal` aborts (rejecting with its reason), and reject (CLUSTER_UNAVAILABLE)
 * when PostgreSQL fails or does not answer (a statement within 10 s): the channel bounds them in
 * time itself, keeps its own copy in its `stateDir` and goes on with it, so an outage never
 * stops its listener.
 */
export interface SharedRecord {
  /** The value last written by any instance, or undefined when none was. */
  read(signal: AbortSignal): Promise<string | undefined>;
  /** Replaces the value for every instance; resolves once PostgreSQL committed it. */
  write(value: string, signal: AbortSignal): Promise<void>;
}
