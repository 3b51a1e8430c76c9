import { SocketModeClient } from '@slack/socket-mode';
import type { FetchFunction, RetryOptions } from '@slack/web-api';
import { slackRefusal } from './errors.js';

/**
 * The longest pause between two Socket Mode connect attempts. The SDK's own policy
 * (apps.connections.open retried 100 times, each wait 1.3 times the last, no ceiling) puts
 * the next attempt an hour away after a long outage.
 */
export const RECONNECT_MAX_DELAY_MS = 30_000;
/** apps.connections.open attempts per connect, as the SDK's default; then the failure ends the listener and the supervisor backs off. */
const CONNECT_RETRIES = 100;
/** The SDK waits this (its clientPingTimeout, left at its default) times the failures in a row before it reconnects. */
const SDK_RECONNECT_STEP_MS = 5000;

/**
 * How the SDK's Web API client retries apps.connections.open: capped at `maxDelayMs`, with
 * jitter (each wait up to twice its base) so many bots do not come back in step, timers that
 * keep no process alive, and nothing more once `stopped` aborts (p-retry ends at a throwing
 * `onFailedAttempt`, an option it takes besides node-retry's).
 */
export function connectRetries(maxDelayMs: number, stopped: AbortSignal): RetryOptions {
  const options: RetryOptions & { onFailedAttempt(err: unknown): void } = {
    retries: CONNECT_RETRIES,
    factor: 1.3,
    minTimeout: Math.min(1000, maxDelayMs),
    maxTimeout: maxDelayMs,
    randomize: true,
    unref: true,
    onFailedAttempt: (err) => {
      if (stopped.aborted) throw err;
    },
  };
  return options;
}

/**
 * The socket client's fetch (apps.connections.open is all it calls): cut when the receiver
 * stops, so no connect lands after it; and a refusal no retry can change reported at once.
 * The SDK treats only some of those (invalid_auth, account_inactive) as final and retries
 * the others (token_revoked) forever.
 */
export function connectFetch(stopped: AbortSignal, onRefused: (err: Error) => void): FetchFunction {
  return async (url, init) => {
    const res = await fetch(url, { ...init, signal: init?.signal ? AbortSignal.any([init.signal, stopped]) : stopped });
    if (res.status === 200) {
      const body = (await res
        .clone()
        .json()
        .catch(() => undefined)) as { ok?: boolean; error?: string } | undefined;
      const refused = body?.ok === false && body.error ? slackRefusal(body.error, 'apps.connections.open') : undefined;
      if (refused) onRefused(refused);
    }
    return res;
  };
}

/**
 * Why an envelope that passed authentication still cannot be an event (a JSON `null`, an
 * `event_callback` whose `event` is `null`), or undefined when it is fine. Such an envelope
 * is acknowledged and dropped: refusing it would make Slack send it again forever.
 */
export function malformedEnvelope(body: unknown): string | undefined {
  const isObject = (v: unknown) => v !== null && typeof v === 'object' && !Array.isArray(v);
  if (!isObject(body)) return 'the body is not a JSON object';
  const b = body as Record<string, unknown>;
  if (b.type === 'event_callback' && !isObject(b.event)) return 'an event_callback without an event object';
  return undefined;
}

/** The SDK's private reconnect bookkeeping (@slack/socket-mode SocketModeClient), which GuardedSocketModeClient adjusts. */
interface ReconnectInternals {
  numOfConsecutiveReconnectionFailures: number;
  delayReconnectAttempt<T>(cb: () => Promise<T>): Promise<T>;
}

/**
 * The SDK reads `payload.event.type` of every events_api envelope before anything else
 * sees it, so a `null` payload or event would throw inside its socket handler (an
 * unhandled rejection) and never be acked. Such an envelope is acked and dropped here.
 */
export class GuardedSocketModeClient extends SocketModeClient {
  onMalformed: (reason: string) => void = () => {};
  /** A reconnect that failed for good (the token refused, the retries spent): the listener ends with it. */
  onFailed: (err: unknown) => void = () => {};
  /** The receiver stopped or failed: no reconnect is scheduled any more. */
  ended = false;

  constructor(options: ConstructorParameters<typeof SocketModeClient>[0], maxDelayMs: number) {
    super(options);
    // The SDK reconnects through its private delayReconnectAttempt(cb), which runs `cb` (its
    // start, or its apps.connections.open) as `cb().then(res)`: a refused token rejects with no
    // one to catch it (an unhandled rejection ends the process) and the listener is never told.
    // Here `cb`'s failure goes to onFailed instead, and the SDK's wait (5 s times the failures
    // in a row, without end) is held under maxDelayMs.
    const sdk = this as unknown as ReconnectInternals;
    const schedule = sdk.delayReconnectAttempt;
    const maxSteps = Math.max(1, Math.floor(maxDelayMs / SDK_RECONNECT_STEP_MS));
    sdk.delayReconnectAttempt = <T>(cb: () => Promise<T>): Promise<T> => {
      // What is left of a chain that failed or was stopped: it waits for nothing, forever.
      if (this.ended) return new Promise<T>(() => {});
      sdk.numOfConsecutiveReconnectionFailures = Math.min(sdk.numOfConsecutiveReconnectionFailures, maxSteps - 1);
      return schedule.call(this, () =>
        cb.apply(this).catch((err: unknown) => {
          this.onFailed(err);
          return new Promise<T>(() => {});
        }),
      ) as Promise<T>;
    };
  }

  protected override async onWebSocketMessage(data: string | ArrayBuffer, isBinary: boolean): Promise<void> {
    if (!isBinary) {
      let frame: { type?: unknown; envelope_id?: unknown; payload?: unknown } | undefined;
      try {
        frame = JSON.parse(typeof data === 'string' ? data : new TextDecoder().decode(data)) as typeof frame;
      } catch {
        // Not JSON: the SDK logs and ignores it.
      }
      const bad = frame?.type === 'events_api' ? malformedEnvelope(frame.payload) : undefined;
      if (bad && typeof frame?.envelope_id === 'string') {
        this.onMalformed(bad);
        // The ack the SDK would send: `send` is private in its types, public in its code.
        await (this as unknown as { send(id: string): Promise<void> }).send(frame.envelope_id).catch(() => {});
        return;
      }
    }
    return super.onWebSocketMessage(data, isBinary);
  }
}
