import WebSocket from 'ws';
import { ChannelError } from '../../src/contracts/errors.js';

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
 * ends it, so the listener reconnects and catches up over REST. Resolves with why it ended;
 * rejects when the server refuses the token (fatal) or a handler fails.
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
    let chain = Promise.resolve();
    let settled = false;
    let awaitingPong = false;
    const finish = (err: Error | undefined, reason: string, lostEvents = false) => {
      if (settled) return;
      settled = true;
      clearTimeout(connectTimer);
      clearInterval(pinger);
      o.signal.removeEventListener('abort', onAbort);
      ws.removeAllListeners();
      // Errors after this point (a late close frame) have no one to tell.
      ws.on('error', () => {});
      if (ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING) ws.terminate();
      if (err) reject(err);
      else resolve({ reason, connectionId, sequence, lostEvents });
    };
    const onAbort = () => finish(undefined, 'stopped');
    o.signal.addEventListener('abort', onAbort, { once: true });
    const connectTimer = setTimeout(() => finish(undefined, `no hello within ${o.connectTimeoutMs} ms`), o.connectTimeoutMs);
    const pinger = setInterval(() => {
      if (awaitingPong) return finish(undefined, 'no pong to the last ping');
      awaitingPong = true;
      ws.ping();
    }, o.pingIntervalMs);
    /** Handlers run one after another, in the order the socket gave their events. */
    const enqueue = (fn: () => Promise<void>) => {
      chain = chain.then(async () => {
        if (settled) return;
        try {
          await fn();
        } catch (err) {
          finish(err instanceof Error ? err : new Error(String(err)), '');
        }
      });
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
      expected = Math.max(expected, ev.seq + 1);
      const seq = ev.seq;
      enqueue(async () => {
        await o.onEvent(ev);
        sequence = seq;
      });
    });
  });
}
