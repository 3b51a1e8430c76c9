import type { Socket } from 'node:net';
import { settleWithin } from '../util/abortable.js';

/**
 * The plain HTTP connections a server holds, for an upgrade's old process to wait until they
 * ended. A WebSocket's socket leaves the count when it is upgraded: its handler owns it from
 * then on (web chat moves its tabs on its own).
 *
 * Why wait at all: an idle keep-alive connection cannot be closed by the server without a
 * race, since the client may have sent its next request already (it fails with "other side
 * closed" or ECONNRESET, and fetch does not retry). Once the old process stopped accepting,
 * every answer it gives says `Connection: close`, so each client moves to the new process
 * with its next request; one that sends none closes the connection itself, or the server's
 * keep-alive timeout does, both the usual way clients are told about (`Keep-Alive: timeout`).
 */
export class ConnectionDrain {
  readonly #open = new Set<Socket>();
  /** Settles when the last open connection ends; made by the first drained() that waits. */
  #empty: { promise: Promise<void>; resolve: () => void } | undefined;

  /** A new connection: counted until it closes. */
  track(socket: Socket): void {
    this.#open.add(socket);
    socket.once('close', () => this.forget(socket));
  }

  /** The connection ended, or was upgraded and is not HTTP any more. */
  forget(socket: Socket): void {
    if (!this.#open.delete(socket) || this.#open.size > 0) return;
    this.#empty?.resolve();
    this.#empty = undefined;
  }

  /** Resolves once no plain HTTP connection is open, or when `signal` aborts. */
  async drained(signal: AbortSignal): Promise<void> {
    if (this.#open.size === 0) return;
    if (!this.#empty) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
      this.#empty = { promise, resolve };
    }
    await settleWithin(this.#empty.promise, Infinity, signal);
  }
}
