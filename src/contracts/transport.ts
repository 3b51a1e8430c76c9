/** What every outgoing request of a channel takes: its bounds, buttons, and when it went out. */

/**
 * A button under a message (approval questions). `data` is the command text a click sends
 * back as the clicker's message, e.g. `/approve 3fa9c1`; it fits the smallest platform limit (64 bytes).
 */
export interface Button {
  label: string;
  data: string;
  style?: 'primary' | 'danger';
}

export interface TransportOptions {
  /**
   * Cuts the request: the adapter rejects with the signal's reason as soon as it aborts,
   * whether or not its client can cancel the request itself. Required, so every caller
   * decides what bounds its calls (a turn's stop, the daemon's hard stop, a time limit).
   */
  signal: AbortSignal;
  /** This is the turn's last write to this message (web chat marks it final). */
  final?: boolean;
  /**
   * Stable across restarts for the same reply message (the user's message id and the chunk
   * index). Platforms with idempotent sends (a message nonce) use it so a re-run after a
   * crash cannot post the same message twice.
   */
  idempotencyKey?: string;
  /** Buttons to show under the message; on an edit, `[]` removes the ones it had. */
  buttons?: Button[];
  /**
   * Filled in by a transport that can tell when its request went out on a connection, after
   * any wait for one (the last request's, when one call made several). A final edit's floor
   * counts from it rather than from the answer (src/stream/pacer.ts); a transport that
   * cannot tell leaves it empty, and the floor counts from the answer.
   */
  sentAt?: SentAt;
}

/** When a request went out (ms since the epoch), as its transport saw it; see `TransportOptions.sentAt`. */
export interface SentAt {
  atMs?: number;
}
