import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';

/**
 * A small file rewritten as its content changes: writes are coalesced (one in flight, the
 * newest text next) and atomic (a temp file of this process + rename: the old and the new
 * process of an upgrade never write into one temp file).
 */
export class CoalescedFile {
  #pending: string | undefined;
  #writing: Promise<void> | undefined;

  constructor(readonly path: string) {}

  /** Writes `text` soon; `onError` hears a failed write (the next one tries again). */
  save(text: string, onError: (err: unknown) => void): void {
    this.#pending = text;
    this.#writing ??= this.#drain(onError);
  }

  /** Resolves once every text handed to `save` is written (or failed). */
  async flushed(): Promise<void> {
    while (this.#writing) await this.#writing;
  }

  async #drain(onError: (err: unknown) => void): Promise<void> {
    try {
      while (this.#pending !== undefined) {
        const text = this.#pending;
        this.#pending = undefined;
        try {
          await mkdir(dirname(this.path), { recursive: true });
          await writeFile(`${this.path}.${process.pid}.tmp`, text);
          await rename(`${this.path}.${process.pid}.tmp`, this.path);
        } catch (err) {
          onError(err);
        }
      }
    } finally {
      this.#writing = undefined;
    }
  }
}

/**
 * Where a listener stands: the platform time (ms) of the newest message stored, kept in a file
 * under the state dir, so a restart catches up on what was posted while the daemon was down.
 */
export class CursorFile {
  readonly #file: CoalescedFile;

  constructor(readonly path: string) {
    this.#file = new CoalescedFile(path);
  }

  /** The stored cursor, or undefined when there is none (a first start) or it cannot be read. */
  async read(): Promise<number | undefined> {
    try {
      const v = Number((await readFile(this.path, 'utf8')).trim());
      return Number.isSafeInteger(v) && v > 0 ? v : undefined;
    } catch {
      return undefined;
    }
  }

  /** Stores `cursorMs` soon; `onError` hears a failed write (the next one tries again). */
  save(cursorMs: number, onError: (err: unknown) => void): void {
    this.#file.save(`${cursorMs}\n`, onError);
  }

  /** Resolves once every value handed to `save` is written (or failed). */
  flushed(): Promise<void> {
    return this.#file.flushed();
  }
}

/** A platform's clock and the inbox's may differ by this much: a catch-up stays this far inside the duplicate window. */
const CLOCK_MARGIN_MS = 15_000;

/**
 * How far back a catch-up may read: `maxMs` (older messages are history, not questions), and
 * never past what the inbox still recognises as delivered (`duplicateWindowMs`: its retention
 * on one node, the shared stream's window in cluster mode, where another instance's cursor in
 * its own state dir may be hours old). A message older than that, answered already, would be
 * answered again.
 */
export function catchUpReachMs(maxMs: number, duplicateWindowMs?: () => number): number {
  return Math.max(0, Math.min(maxMs, (duplicateWindowMs?.() ?? Number.POSITIVE_INFINITY) - CLOCK_MARGIN_MS));
}
