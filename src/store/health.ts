import type { Logger } from '../observe/logger.js';

/** What `/status` shows under `storage`. */
export interface StorageStatus {
  state: 'ok' | 'degraded';
  /** The SQLite code of the failure (SQLITE_FULL, SQLITE_BUSY, SQLITE_CORRUPT, ...). */
  code: string | null;
  error: string | null;
  since: string;
  /** Writes waiting for the database to take them again. */
  pending_writes: number;
}

/**
 * SQLite failures that say "not now" about the database rather than "this statement is
 * wrong": a full disk, a lock another process holds, an I/O or corruption error. They
 * are retried; SQL errors (constraints, syntax) are bugs and are not.
 */
export function isStorageFault(err: unknown): err is Error & { code: string } {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !code.startsWith('SQLITE_')) return false;
  return !/^SQLITE_(CONSTRAINT|MISMATCH|RANGE|ERROR|MISUSE|TOOBIG)/.test(code);
}

/** Whether a fault is a lock held elsewhere, which usually clears within seconds. */
export function isLockFault(code: string | null): boolean {
  return code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED' || (code?.startsWith('SQLITE_BUSY_') ?? false);
}

/**
 * Whether the database takes writes. Changes are logged once each (degraded with the
 * code, then recovered) and reported to `onChange` (the metric).
 */
export class StorageHealth {
  #code: string | null = null;
  #error: string | null = null;
  #since = new Date();
  readonly #waiters = new Set<() => void>();

  constructor(
    private readonly log?: Logger,
    private readonly onChange?: (degraded: boolean, code: string | null) => void,
  ) {}

  get ok(): boolean {
    return this.#code === null;
  }

  get code(): string | null {
    return this.#code;
  }

  /** Records a failed write; logs only when the state (or its code) changes. */
  fail(err: Error & { code: string }): void {
    if (this.#code === err.code) return;
    const first = this.#code === null;
    this.#code = err.code;
    this.#error = err.message;
    if (first) this.#since = new Date();
    this.log?.error({ code: err.code, err: err.message }, `storage degraded: ${err.code}; new messages are refused until the database takes writes again`);
    this.onChange?.(true, err.code);
  }

  /** Records a successful write after a failure. */
  recover(): void {
    if (this.#code === null) return;
    const was = this.#code;
    this.#code = null;
    this.#error = null;
    const downMs = Date.now() - this.#since.getTime();
    this.#since = new Date();
    this.log?.info({ was, downMs }, 'storage recovered: the database takes writes again');
    this.onChange?.(false, null);
    for (const w of [...this.#waiters]) w();
  }

  /** Resolves true once writes work again, false after `ms` or when `signal` aborts. */
  whenOk(ms: number, signal?: AbortSignal): Promise<boolean> {
    if (this.ok) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = (ok: boolean) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.#waiters.delete(onOk);
        resolve(ok);
      };
      const onOk = () => done(true);
      const onAbort = () => done(false);
      const timer = setTimeout(() => done(false), ms);
      this.#waiters.add(onOk);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  status(pendingWrites: number): StorageStatus {
    return { state: this.ok ? 'ok' : 'degraded', code: this.#code, error: this.#error, since: this.#since.toISOString(), pending_writes: pendingWrites };
  }
}
