import type { Socket } from 'node:net';

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
  readonly #waiters = new Set<() => void>();

  /** A new connection: counted until it closes. */
  track(socket: Socket): void {
    this.#open.add(socket);
    socket.once('close', () => this.forget(socket));
  }

  /** The connection ended, or was upgraded and is not HTTP any more. */
  forget(socket: Socket): void {
    if (!this.#open.delete(socket) || this.#open.size > 0) return;
    for (const wake of [...this.#waiters]) wake();
  }

  get size(): number {
    return this.#open.size;
  }

  /** Resolves once no plain HTTP connection is open, or when `signal` aborts. */
  drained(signal: AbortSignal): Promise<void> {
    if (this.#open.size === 0 || signal.aborted) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const wake = () => {
        this.#waiters.delete(wake);
        signal.removeEventListener('abort', wake);
        resolve();
      };
      this.#waiters.add(wake);
      signal.addEventListener('abort', wake, { once: true });
    });
  }
}
