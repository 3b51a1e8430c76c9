import WebSocket, { type RawData } from 'ws';
import { ChannelError } from '../../src/contracts/errors.js';

/** The most events that may wait behind a slow handler: the hold's own default (`degraded_hold_messages`). */
export const MAX_WAITING_EVENTS = 1000;
/** The most bytes (as received) those events may take: the hold's default (`degraded_hold_bytes`). */
export const MAX_WAITING_BYTES = 8 * 1024 * 1024;

/** One event from the WebSocket: `posted`, `hello`, `typing`, ...; `seq` counts the connection's events from 0. */
export interface MmEvent {
  event?: string;
  data?: Record<string, unknown>;
  broadcast?: { channel_id?: string; team_id?: string; user_id?: string };
  seq?: number;
  /** Set on replies to our own actions (`seq_reply`, `status`). */
  seq_reply?: number;
  status?: string;
  error?: { id?: string; message?: string };
}

export interface SocketOptions {
  /** `wss://host/api/v4/websocket` (or ws:// for http servers). */
  wsUrl: string;
  token: string;
  signal: AbortSignal;
  /** The connection to resume (the server replays what it still has after `sequence`), if any. */
  resume?: { connectionId: string; sequence: number } | undefined;
  /** How long the upgrade, the challenge and the server's `hello` may take together. */
  connectTimeoutMs: number;
  /** How often a ping checks the connection; a ping left without a pong by the next one ends it. */
  pingIntervalMs: number;
  /** The server said hello: the connection is up. `resumed` when it kept our connection id. */
  onHello(connectionId: string, resumed: boolean, socket: { send(action: string, data: unknown): void }): void;
  /** Runs after hello, before any event is handled (the REST catch-up); a rejection ends the connection with that error. */
  afterHello(resumed: boolean): Promise<void>;
  /** Each event after hello, in order; the next one waits for it. A rejection ends the connection with that error. */
  onEvent(ev: MmEvent): Promise<void>;
  /**
   * The connection ended for `reason` (not stopped, not refused, no handler failed), told at
   * once: `runSocket` resolves only when the handler running then is done.
   */
  onClose?(reason: string): void;
  /**
   * How many events (and bytes) may wait behind a slow handler (`deliver` held while storage
   * is down, a long catch-up); one more ends the connection with `lostEvents`, so the next
   * one's REST catch-up fetches them once the handler is done. Defaults: MAX_WAITING_*.
   */
  maxWaitingEvents?: number;
  maxWaitingBytes?: number;
}

/** Why a connection ended: the next one resumes from `sequence` of `connectionId` where it can. */
export interface SocketEnd {
  reason: string;
  connectionId: string | undefined;
  /** The seq of the last event handled. */
  sequence: number;
  /** The connection lost events: the next one starts afresh instead of resuming it. */
  lostEvents: boolean;
}

/**
 * One WebSocket connection: upgrade, `authentication_challenge` with the token, `hello`, then
 * events in order until it closes. A gap in `seq` (an event lost between us and the server)
 * ends it, so the listener reconnects and catches up over REST; so does a backlog past
 * `maxWaitingEvents`/`maxWaitingBytes` behind a slow handler, rather than queueing without
 * bound. Resolves with why it ended, once the handler running then is done (a reconnect's
 * catch-up never runs beside it; stopping does not wait); rejects when the server refuses
 * the token (fatal) or a handler fails.
 */
export function runSocket(o: SocketOptions): Promise<SocketEnd> {
  const url = new URL(o.wsUrl);
  if (o.resume) {
    url.searchParams.set('connection_id', o.resume.connectionId);
    url.searchParams.set('sequence_number', String(o.resume.sequence));
  }
  return new Promise<SocketEnd>((resolve, reject) => {
    const ws = new WebSocket(url, { handshakeTimeout: o.connectTimeoutMs, maxPayload: 4 * 1024 * 1024 });
    let connectionId: string | undefined;
    let expected = 0;
    let sequence = o.resume?.sequence ?? -1;
    let actionSeq = 1;
    const maxEvents = o.maxWaitingEvents ?? MAX_WAITING_EVENTS;
    const maxBytes = o.maxWaitingBytes ?? MAX_WAITING_BYTES;
    /** Handlers not started yet, in the order the socket gave their events, and their bytes. */
    const waiting: Array<{ run: () => Promise<void>; bytes: number }> = [];
    let waitingBytes = 0;
    /** Runs the waiting handlers one after another; set while one runs. */
    let running: Promise<void> | undefined;
    let settled = false;
    let awaitingPong = false;
    const finish = (err: Error | undefined, reason: string, lostEvents = false) => {
      if (settled) return;
      settled = true;
      // What never ran is let go here: the next connection's catch-up fetches it.
      waiting.length = 0;
      waitingBytes = 0;
      clearTimeout(connectTimer);
      clearInterval(pinger);
      o.signal.removeEventListener('abort', onAbort);
      ws.removeAllListeners();
      // Errors after this point (a late close frame) have no one to tell.
      ws.on('error', () => {});
      if (ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING) ws.terminate();
      if (err) return reject(err);
      if (!o.signal.aborted) o.onClose?.(reason);
      let told = false;
      const end = () => {
        if (told) return;
        told = true;
        o.signal.removeEventListener('abort', end);
        resolve({ reason, connectionId, sequence, lostEvents });
      };
      if (!running || o.signal.aborted) return end();
      o.signal.addEventListener('abort', end, { once: true });
      void running.then(end);
    };
    const onAbort = () => finish(undefined, 'stopped');
    o.signal.addEventListener('abort', onAbort, { once: true });
    const connectTimer = setTimeout(() => finish(undefined, `no hello within ${o.connectTimeoutMs} ms`), o.connectTimeoutMs);
    const pinger = setInterval(() => {
      if (awaitingPong) return finish(undefined, 'no pong to the last ping');
      awaitingPong = true;
      ws.ping();
    }, o.pingIntervalMs);
    const pump = async () => {
      for (let job = waiting.shift(); job && !settled; job = waiting.shift()) {
        waitingBytes -= job.bytes;
        try {
          await job.run();
        } catch (err) {
          finish(err instanceof Error ? err : new Error(String(err)), '');
        }
      }
      running = undefined;
    };
    /** Called only before `finish`, so the loop always awaits a handler before it clears `running`. */
    const enqueue = (run: () => Promise<void>, bytes = 0) => {
      waiting.push({ run, bytes });
      waitingBytes += bytes;
      running ??= pump();
    };
    const send = (action: string, data: unknown) => {
      if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ seq: actionSeq++, action, data }));
    };
    ws.on('pong', () => (awaitingPong = false));
    ws.on('unexpected-response', (_req, res) => {
      const status = res.statusCode ?? 0;
      res.resume();
      if (status === 401)
        finish(
          new ChannelError('CHANNEL_AUTH_FAILED', 'Mattermost WebSocket: HTTP 401: the token was refused; check token_env/token_file', { retryable: false }),
          '',
        );
      else finish(undefined, `WebSocket upgrade answered HTTP ${status}`);
    });
    ws.on('open', () => send('authentication_challenge', { token: o.token }));
    ws.on('error', (err) => finish(undefined, `WebSocket error: ${err.message}`));
    ws.on('close', (code) => finish(undefined, `WebSocket closed (${code})`));
    ws.on('message', (raw, isBinary) => {
      if (isBinary) return;
      let ev: MmEvent;
      try {
        ev = JSON.parse(String(raw)) as MmEvent;
      } catch {
        return;
      }
      if (ev.seq_reply !== undefined) {
        if (ev.seq_reply === 1 && ev.status === 'FAIL')
          finish(
            new ChannelError('CHANNEL_AUTH_FAILED', `Mattermost WebSocket: authentication refused: ${ev.error?.message ?? ev.error?.id ?? 'no reason given'}`, {
              retryable: false,
            }),
            '',
          );
        return;
      }
      if (typeof ev.seq !== 'number') return;
      if (ev.event === 'hello') {
        clearTimeout(connectTimer);
        const id = typeof ev.data?.connection_id === 'string' ? ev.data.connection_id : '';
        const resumed = o.resume !== undefined && id === o.resume.connectionId;
        connectionId = id;
        // A resumed connection goes on counting; a new one starts again after hello.
        expected = ev.seq + 1;
        if (!resumed) sequence = ev.seq;
        o.onHello(id, resumed, { send });
        enqueue(() => o.afterHello(resumed));
        return;
      }
      if (connectionId === undefined) return;
      // Lower than due: a resumed connection replaying what we may have had (the inbox drops
      // repeats). Higher: something was lost on the way.
      if (ev.seq > expected) return finish(undefined, `event seq ${ev.seq} where ${expected} was due: events were lost`, true);
      const bytes = sizeOf(raw);
      if (running && (waiting.length >= maxEvents || waitingBytes + bytes > maxBytes))
        return finish(
          undefined,
          `${waiting.length} events (${waitingBytes} bytes) already wait behind a slow handler: closed, to catch up over REST once it is done`,
          true,
        );
      expected = Math.max(expected, ev.seq + 1);
      const seq = ev.seq;
      enqueue(async () => {
        await o.onEvent(ev);
        sequence = seq;
      }, bytes);
    });
  });
}

function sizeOf(raw: RawData): number {
  return Array.isArray(raw) ? raw.reduce((n, b) => n + b.length, 0) : raw.byteLength;
}
