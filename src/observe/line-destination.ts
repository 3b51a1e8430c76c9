import { writeSync } from 'node:fs';
import type { DestinationStream } from 'pino';

export interface LineDestinationOptions {
  /** The file descriptor lines go to: 1 (stdout) in the daemon. */
  fd: number;
  /** Bytes that may wait for a stdout that stopped reading; lines past this are dropped whole. */
  maxWaitingBytes: number;
  /** How often a stalled stdout is tried again. */
  retryMs: number;
  /** How long an exit waits, at most, for a stalled stdout to take the last lines. */
  exitWaitMs: number;
}

/** What pino needs of a destination, plus the synchronous flush it calls on exit. */
export interface LineDestination extends DestinationStream {
  /** Writes every waiting line now, waiting up to `exitWaitMs` for a stalled stdout. */
  flushSync(): void;
  /** Writes what stdout takes now (`log.flush()`); a stalled rest keeps being tried. */
  flush(done?: () => void): void;
  /** Lines dropped because stdout stopped reading (past `maxWaitingBytes`) or was closed. */
  readonly droppedLines: number;
}

/**
 * Log lines to `fd`: the lines logged in one turn of the event loop go out together in one
 * synchronous write when the turn ends (setImmediate), so a line is on stdout before the
 * daemon does anything else, without a write per line and without a thread-pool round trip
 * per write (pino's asynchronous sonic-boom spends one per write: about 23 µs more CPU than a
 * direct write for the one line a turn usually logs, `docs/PERFORMANCE.md`, twentieth round).
 *
 * A stdout that stops reading never blocks the daemon: a pipe or socket is put in
 * non-blocking mode (see stdoutDestination), a write it cannot take whole keeps the rest, tried
 * again every `retryMs`, and lines past `maxWaitingBytes` are dropped whole, never cut. A
 * closed stdout (EPIPE) drops lines instead of failing the daemon.
 */
export function lineDestination(options: LineDestinationOptions): LineDestination {
  /** Lines logged since the last write, as one string. */
  let waiting = '';
  /** The tail of a write stdout took only in part: written before `waiting`. */
  let rest: Buffer | null = null;
  let scheduled = false;
  let retry: NodeJS.Timeout | null = null;
  let closed = false;
  let dropped = 0;

  const waitingBytes = (): number => (rest?.length ?? 0) + waiting.length;
  /** One write attempt of everything waiting; false when stdout could not take it all. */
  const writeOut = (): boolean => {
    try {
      if (rest) {
        const n = writeSync(options.fd, rest);
        rest = n < rest.length ? rest.subarray(n) : null;
        if (rest) return false;
      }
      if (waiting) {
        // Taken only once written: an EAGAIN throws here and leaves every line waiting.
        const n = writeSync(options.fd, waiting);
        const data = waiting;
        waiting = '';
        // Rare (stdout took part of the write): only then is the text made bytes to cut it.
        if (n < Buffer.byteLength(data)) rest = Buffer.from(data).subarray(n);
      }
      return rest === null;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EAGAIN' || code === 'EWOULDBLOCK') return false;
      // EPIPE, EBADF …: nobody will read these lines, now or later.
      closed = true;
      dropped += countLines(waiting) + (rest ? 1 : 0);
      waiting = '';
      rest = null;
      return true;
    }
  };
  /** Writes what stdout takes; a rest is tried again every `retryMs`. */
  const drain = (): void => {
    scheduled = false;
    if (retry) return;
    if (!writeOut()) {
      retry = setTimeout(() => {
        retry = null;
        drain();
      }, options.retryMs);
      // Waiting lines must not keep the process alive: exit flushes them (flushSync).
      retry.unref();
    }
  };

  return {
    write(line: string): void {
      if (closed || waitingBytes() + line.length > options.maxWaitingBytes) {
        dropped++;
        return;
      }
      waiting += line;
      if (!scheduled && !retry) {
        scheduled = true;
        setImmediate(drain);
      }
    },
    flush(done?: () => void): void {
      drain();
      done?.();
    },
    flushSync(): void {
      if (retry) clearTimeout(retry);
      retry = null;
      const deadline = performance.now() + options.exitWaitMs;
      const pause = new Int32Array(new SharedArrayBuffer(4));
      while (!writeOut() && performance.now() < deadline) Atomics.wait(pause, 0, 0, Math.min(options.retryMs, 10));
    },
    get droppedLines() {
      return dropped;
    },
  };
}

function countLines(text: string): number {
  let n = 0;
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) n++;
  return n;
}

/** The process's one stdout destination: every logger writing to stdout shares its queue. */
let stdout: LineDestination | undefined;

/**
 * stdout as a line destination, flushed synchronously when the process exits (waiting up to
 * 1 s for a stalled reader), with up to 16 MiB waiting. It is made non-blocking first when it
 * is a pipe or a socket (journald's stream): Node does so the moment `process.stdout` is first
 * read, and a write that would block then fails with EAGAIN instead of stopping the daemon. A
 * file never blocks for long and a terminal keeps its mode (libuv opens its own descriptor
 * for a TTY).
 */
export function stdoutDestination(): LineDestination {
  if (stdout) return stdout;
  void process.stdout;
  const destination = lineDestination({ fd: 1, maxWaitingBytes: 16 * 2 ** 20, retryMs: 100, exitWaitMs: 1000 });
  process.once('exit', () => destination.flushSync());
  stdout = destination;
  return destination;
}
