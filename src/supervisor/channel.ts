import type { BackoffConfig } from '../config/schema.js';
import type { ChannelAdapter, Deliver } from '../contracts/channel.js';
import { ChannelError, CodedError, errorMessage, type ErrorCode } from '../contracts/errors.js';
import type { Logger } from '../observe/logger.js';
import { backoffDelayMs } from './backoff.js';
import { settleWithin, sleep } from '../util/abortable.js';

export type ChannelStateName = 'starting' | 'standby' | 'connected' | 'backoff' | 'failed' | 'stopped';

/** What /status and `channeld status` show for one channel. */
export interface ChannelStatus {
  id: string;
  kind: string;
  state: ChannelStateName;
  since: string;
  attempts: number;
  next_retry_at: string | null;
  last_error: { code: string; message: string; at: string } | null;
  /** Increases on every new platform connection, since the daemon started (a reload that restarts the channel counts on). */
  connection: number;
  /** In state `standby` (cluster mode): who holds this listener's lease. */
  standby?: string;
  /** The adapter's notes for the operator (ChannelAdapter.notes), when it has any. */
  notes?: string[];
}

export interface SupervisedChannelOptions {
  id: string;
  kind: string;
  /** Only `listen` is supervised, so anything with a listener (an MCP server too) fits. */
  adapter: Pick<ChannelAdapter, 'listen' | 'notes'>;
  deliver: Deliver;
  backoff: BackoffConfig;
  connectTimeoutMs: number;
  log: Logger;
  random?: () => number;
  onState?: (status: ChannelStatus) => void;
  /**
   * Connections this channel already made in this process (a channel restarted by a reload
   * keeps counting from there); 0 by default.
   */
  connectionsBefore?: number;
  /** Told on every new platform connection, with the channel's count so far. */
  onConnection?: (connection: number) => void;
}

/**
 * One supervised listener: runs `adapter.listen`, restarts it with bounded full-jitter
 * backoff on retryable failures, parks it in `failed` on fatal ones, and stops on abort.
 */
export class SupervisedChannel {
  readonly #o: SupervisedChannelOptions;
  readonly #controller = new AbortController();
  #status: ChannelStatus;
  #loop: Promise<void> | undefined;
  #firstAttempt!: () => void;
  #pastFirstAttempt = false;
  /** Resolves once the first connect attempt has settled (connected, failed or backing off). */
  readonly firstAttempt: Promise<void> = new Promise((r) => (this.#firstAttempt = r));

  constructor(options: SupervisedChannelOptions) {
    this.#o = options;
    this.#status = {
      id: options.id,
      kind: options.kind,
      state: 'stopped',
      since: new Date().toISOString(),
      attempts: 0,
      next_retry_at: null,
      last_error: null,
      connection: options.connectionsBefore ?? 0,
    };
  }

  /** Whether the first connect attempt has settled; /readyz waits for every channel's. */
  get pastFirstAttempt(): boolean {
    return this.#pastFirstAttempt;
  }

  status(): ChannelStatus {
    const notes = this.#o.adapter.notes?.() ?? [];
    return { ...this.#status, ...(this.#status.state === 'standby' ? { standby: this.#standbyBy } : {}), ...(notes.length ? { notes } : {}) };
  }
  #standbyBy = '';

  #set(state: ChannelStateName, patch: Partial<ChannelStatus> = {}): void {
    const changed = state !== this.#status.state;
    this.#status = { ...this.#status, ...patch, state, ...(changed ? { since: new Date().toISOString() } : {}) };
    if (state !== 'starting' && !this.#pastFirstAttempt) {
      this.#pastFirstAttempt = true;
      this.#firstAttempt();
    }
    if (!changed) return;
    const { id, attempts, last_error, next_retry_at } = this.#status;
    const fields = {
      channel: id,
      state,
      attempts,
      ...(last_error && (state === 'backoff' || state === 'failed') ? { error: last_error } : {}),
      ...(next_retry_at ? { next_retry_at } : {}),
    };
    if (state === 'failed') this.#o.log.error(fields, `channel ${id} failed: ${last_error?.message ?? ''}`);
    else if (state === 'backoff') this.#o.log.warn(fields, `channel ${id} backing off`);
    // A retry's "starting" is implied by the backoff line before it.
    else if (state === 'starting' && attempts > 1) this.#o.log.debug(fields, `channel ${id} ${state}`);
    else this.#o.log.info(fields, `channel ${id} ${state}`);
    this.#o.onState?.(this.status());
  }

  #recordError(err: unknown): void {
    const code = err instanceof CodedError ? err.code : 'CHANNEL_NETWORK';
    this.#status.last_error = { code, message: errorMessage(err), at: new Date().toISOString() };
  }

  start(): void {
    this.#loop ??= this.#run();
  }

  /**
   * The one retry loop: attempt, and on a retryable failure back off (full jitter) and try
   * again; on a fatal one park in `failed`; on abort stop. A run that lasted `stable_ms`
   * counts as a fresh start, so its failure backs off from attempt 1 again.
   */
  async #run(): Promise<void> {
    const signal = this.#controller.signal;
    let attempt = 0;
    while (!signal.aborted) {
      attempt++;
      const ended = await this.#attempt(attempt);
      if (!ended) break;
      this.#recordError(ended.error);
      if (!ended.error.retryable) {
        this.#set('failed', { next_retry_at: null });
        return;
      }
      // After a stable run, back off as after a first failure and count the attempts anew.
      const backoffAttempt = ended.stable ? 1 : attempt;
      if (ended.stable) attempt = 0;
      await this.#backOff(backoffAttempt, signal);
    }
    this.#set('stopped', { next_retry_at: null });
  }

  /** Shows `backoff` with the retry time, and waits that full-jitter delay. */
  async #backOff(attempt: number, signal: AbortSignal): Promise<void> {
    const waitMs = backoffDelayMs(attempt, this.#o.backoff, this.#o.random);
    this.#set('backoff', { attempts: attempt, next_retry_at: new Date(Date.now() + waitMs).toISOString() });
    await sleep(waitMs, signal);
  }

  /**
   * One run of the listener, from connect to its end. Resolves how it failed (and whether it
   * had run `stable_ms` first), or undefined when the channel is stopping.
   */
  async #attempt(attemptNumber: number): Promise<{ error: CodedError; stable: boolean } | undefined> {
    const signal = this.#controller.signal;
    this.#set('starting', { attempts: attemptNumber, next_retry_at: null });
    const attempt = new AbortController();
    const onAbort = () => attempt.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    // Only the attempt running now may change the status: an SDK callback that fires after
    // the supervisor gave up on its attempt (timed out, failed) must not show it connected.
    let current = true;
    let connectedAt: number | undefined;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const err = new ChannelError('CHANNEL_CONNECT_TIMEOUT', `channel "${this.#o.id}" did not connect within ${this.#o.connectTimeoutMs} ms`);
        reject(err);
        attempt.abort(err);
      }, this.#o.connectTimeoutMs);
    });
    timedOut.catch(() => {});
    const onConnected = () => {
      if (!current) return;
      clearTimeout(timer);
      connectedAt = Date.now();
      this.#set('connected', { connection: this.#status.connection + 1, attempts: 0, next_retry_at: null });
      this.#o.onConnection?.(this.#status.connection);
    };
    const onReconnecting = (reason: string) => {
      if (!current || attempt.signal.aborted) return;
      this.#status.last_error = { code: 'CHANNEL_NETWORK', message: reason, at: new Date().toISOString() };
      this.#set('backoff', { next_retry_at: null });
    };
    const onStandby = (detail: string) => {
      if (!current) return;
      // Waiting for a lease is not a slow connect: no timeout while another instance listens.
      clearTimeout(timer);
      this.#set('standby', { next_retry_at: null, attempts: 0 });
      this.#standbyBy = detail;
    };
    try {
      await Promise.race([this.#o.adapter.listen(this.#o.deliver, attempt.signal, onConnected, onReconnecting, onStandby), timedOut]);
      if (signal.aborted) return undefined;
      // The adapter saw the timeout's abort as a stop request and returned cleanly.
      if (attempt.signal.aborted) throw attempt.signal.reason;
      throw new ChannelError('CHANNEL_ENDED', `channel "${this.#o.id}" listener returned on its own`);
    } catch (err) {
      if (signal.aborted) return undefined;
      const error = toChannelError(err);
      return { error, stable: error.retryable && connectedAt !== undefined && Date.now() - connectedAt >= this.#o.backoff.stable_ms };
    } finally {
      current = false;
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    }
  }

  /** Aborts the listener and waits up to `graceMs` for it to close. */
  async stop(graceMs: number): Promise<void> {
    this.#controller.abort(new CodedError('CHANNEL_STOPPING', `channel "${this.#o.id}" is stopping`));
    if (!this.#loop) {
      this.#set('stopped');
      return;
    }
    await settleWithin(this.#loop, graceMs);
    if (this.#status.state !== 'stopped' && this.#status.state !== 'failed') this.#set('stopped');
  }
}

/** Unknown failures (an SDK's TypeError, say) are presumed transient: retryable network errors. */
function toChannelError(err: unknown): CodedError {
  if (err instanceof CodedError) return err;
  const code: ErrorCode = 'CHANNEL_NETWORK';
  return new ChannelError(code, errorMessage(err), { cause: err, retryable: true });
}
