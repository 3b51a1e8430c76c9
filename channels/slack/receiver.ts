import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { App, Receiver } from '@slack/bolt';
// Not from the package's index, which loads receivers channeld never uses (see adapter.ts).
import { isValidSlackRequest } from '@slack/bolt/dist/receivers/verify-request.js';
import { Agent, buildConnector } from 'undici';
import { connectFetch, connectRetries, GuardedSocketModeClient, malformedEnvelope, RECONNECT_MAX_DELAY_MS } from './socket-client.js';
import { BODY_TIMEOUT_MS, readBody, refuseAndClose, sendJson } from '../../src/util/http-helpers.js';
import { settleWithin } from '../../src/util/abortable.js';
import type { HttpRoutes } from '../../src/contracts/http.js';
import type { Logger } from 'pino';

const MAX_BODY_BYTES = 1024 * 1024;
/**
 * At stop, how long envelopes still being stored may take to be acked before the socket
 * closes: an envelope received just before the stop is then acked on the socket it came on,
 * not sent again by Slack (which the inbox would drop as a duplicate).
 */
const STOP_DRAIN_MS = 2000;
/** Slack's replay window, both ways: a request stamped further from now is refused. */
const MAX_CLOCK_SKEW_S = 5 * 60;
/** The form of X-Slack-Signature: `v0=` and a hex HMAC-SHA256. */
const SIGNATURE_FORM = /^v0=[0-9a-f]{64}$/i;
/**
 * The largest Socket Mode frame read into memory (undici's default is 128 MiB). An envelope
 * is one event or interaction payload, far smaller (a message's text is at most 40,000
 * characters, its blocks 50); a larger frame fails the socket with 1009 and the SDK reconnects.
 */
export const MAX_FRAME_BYTES = 16 * 1024 * 1024;

export { malformedEnvelope };

/** Bolt's App acks Events API envelopes before listeners run; this is how we ack after. */
async function processThenAck(app: App, body: Record<string, unknown>, ack: () => Promise<void>, retryNum?: number): Promise<void> {
  // Bolt calls the ack it is given right away; the real one waits until our listener (which
  // stores the message in the inbox) has finished. If storing fails, nothing is acked and
  // Slack sends the event again.
  await app.processEvent({ body, ack: async () => {}, ...(retryNum !== undefined ? { retryNum } : {}) });
  await ack();
}

export interface SocketReceiverOptions {
  appToken: string;
  slackApiUrl: string;
  log: Logger;
  onConnected(): void;
  onReconnecting(reason: string): void;
  /** The longest pause between connect attempts; RECONNECT_MAX_DELAY_MS unless a test shortens it. */
  reconnectMaxDelayMs?: number;
}

/**
 * The WebSocket's undici dispatcher: @slack/socket-mode takes one (`dispatcher`, its public
 * option), and undici reads the frame bound from it. The SDK's own dispatcher keeps each
 * socket to destroy it when a peer never completes the close handshake; one passed in is
 * not kept, so this one keeps them and `abandon()` destroys them (on the SDK's `close`, when
 * it has let go of its WebSocket). Only the WebSocket uses it: Web API calls keep global fetch.
 */
class FrameBoundDispatcher {
  readonly #sockets = new Set<Socket>();
  readonly agent: Agent;

  constructor(maxFrameBytes: number) {
    // HTTP/1.1, as the SDK's own: a WebSocket keeps a socket of its own.
    const connect = buildConnector({ allowH2: false });
    this.agent = new Agent({
      webSocket: { maxPayloadSize: maxFrameBytes },
      connect: (opts, callback) =>
        connect(opts, (...answer) => {
          const socket = answer[1];
          if (socket) {
            this.#sockets.add(socket);
            socket.once('close', () => this.#sockets.delete(socket));
          }
          callback(...answer);
        }),
    });
  }

  abandon(): void {
    for (const socket of this.#sockets) socket.destroy();
    this.#sockets.clear();
  }
}

/** Socket Mode through @slack/socket-mode, acking each envelope only after it is stored. */
export class DeferredAckSocketReceiver implements Receiver {
  readonly client: GuardedSocketModeClient;
  #app: App | undefined;
  /** Envelopes being stored, to be acked before the socket closes at stop. */
  readonly #inFlight = new Set<Promise<void>>();
  readonly #dispatcher: FrameBoundDispatcher;
  /** Aborted at stop: the connect under way and every retry after it end. */
  readonly #stopped = new AbortController();
  /**
   * Rejects when Socket Mode fails for good while the SDK connects by itself (the app token
   * refused, at start or on a reconnect; a reconnect's retries spent): the listener races it
   * and ends with that error.
   */
  readonly failed: Promise<never>;

  constructor(readonly o: SocketReceiverOptions) {
    this.#dispatcher = new FrameBoundDispatcher(MAX_FRAME_BYTES);
    let reject: (err: unknown) => void = () => {};
    this.failed = new Promise<never>((_, no) => (reject = no));
    // Raced by the listener only while it runs: a failure after it ended is nobody's.
    this.failed.catch(() => {});
    const fail = (err: unknown) => {
      if (client.ended) return;
      client.ended = true;
      reject(err);
    };
    const maxDelayMs = o.reconnectMaxDelayMs ?? RECONNECT_MAX_DELAY_MS;
    const client = new GuardedSocketModeClient(
      {
        appToken: o.appToken,
        // With a dispatcher and no fetch, the SDK would send its Web API calls through it too.
        clientOptions: {
          slackApiUrl: o.slackApiUrl,
          fetch: connectFetch(this.#stopped.signal, fail),
          retryConfig: connectRetries(maxDelayMs, this.#stopped.signal),
        },
        dispatcher: this.#dispatcher.agent,
        logLevel: 'error' as never,
      },
      maxDelayMs,
    );
    client.onMalformed = (reason) => o.log.debug({ reason }, 'malformed Slack envelope acknowledged and dropped');
    client.onFailed = fail;
    this.client = client;
    this.client.on('slack_event', async ({ ack, body, retry_num }: { ack: () => Promise<void>; body: Record<string, unknown>; retry_num?: number }) => {
      if (!this.#app) return;
      const bad = malformedEnvelope(body);
      if (bad) {
        o.log.debug({ reason: bad }, 'malformed Slack envelope acknowledged and dropped');
        await ack().catch(() => {});
        return;
      }
      const handled = processThenAck(this.#app, body, ack, retry_num).catch((err: unknown) => {
        o.log.warn({ err }, 'Slack event not stored; not acked, Slack will send it again');
      });
      this.#inFlight.add(handled);
      await handled;
      this.#inFlight.delete(handled);
    });
    this.client.on('connected', () => o.onConnected());
    // The SDK has let go of its WebSocket (it emits this after its own cleanup).
    this.client.on('close', () => this.#dispatcher.abandon());
    // undici tells no one why it failed a connection: a frame over the bound looks like a drop.
    const mib = MAX_FRAME_BYTES / (1024 * 1024);
    this.client.on('reconnecting', () =>
      o.onReconnecting(`Slack Socket Mode connection lost (the network, or a frame over ${mib} MiB refused with 1009); reconnecting`),
    );
  }

  init(app: App): void {
    this.#app = app;
  }
  start(): Promise<unknown> {
    return this.client.start();
  }
  async stop(): Promise<unknown> {
    // No reconnect from here on, and a connect under way (the SDK's retries) is cut.
    this.client.ended = true;
    this.#stopped.abort();
    await settleWithin(Promise.all(this.#inFlight), STOP_DRAIN_MS);
    try {
      return await this.client.disconnect();
    } finally {
      this.#dispatcher.abandon();
      await this.#dispatcher.agent.destroy().catch(() => {});
    }
  }
}

export interface HttpReceiverOptions {
  path: string;
  signingSecret: string;
  http: HttpRoutes;
  log: Logger;
}

/**
 * Events API over HTTP on the daemon's server. Headers that cannot pass (no `v0=<hex>`
 * signature, a timestamp outside 5 minutes) are refused before the body is read; the v0
 * signature is checked on the raw bytes (constant time) before anything is parsed, and a body
 * not all in within BODY_TIMEOUT_MS is 408. The 200 goes out once the
 * event is stored, well inside Slack's 3 s, while the turn runs in the background.
 */
export class DeferredAckHttpReceiver implements Receiver {
  #app: App | undefined;
  #remove: (() => void) | undefined;

  constructor(private readonly o: HttpReceiverOptions) {}

  init(app: App): void {
    this.#app = app;
  }

  async start(): Promise<unknown> {
    this.#remove = this.o.http.route('POST', this.o.path, (req, res) => this.#handle(req, res), {
      scheme: 'hmac-sha256',
      describe: 'X-Slack-Signature (v0) over timestamp and raw body with signing_secret, timestamp within 5 minutes',
    });
    return undefined;
  }

  async stop(): Promise<unknown> {
    this.#remove?.();
    return undefined;
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // A refused client gets no keep-alive: an unread body would hold the socket.
    const refuse = () => void res.writeHead(401, { 'content-type': 'text/plain', connection: 'close' }).end('invalid signature or stale timestamp\n');
    const signature = req.headers['x-slack-signature'];
    const timestamp = Number(req.headers['x-slack-request-timestamp']);
    // Bolt refuses only stale timestamps; a future one would let a captured request be replayed later.
    const fresh = Number.isFinite(timestamp) && Math.abs(Date.now() / 1000 - timestamp) <= MAX_CLOCK_SKEW_S;
    // Headers that cannot pass are refused before the body (up to 1 MiB) is read.
    if (typeof signature !== 'string' || !SIGNATURE_FORM.test(signature) || !fresh) {
      req.resume();
      return refuse();
    }
    const body = await readBody(req, MAX_BODY_BYTES, BODY_TIMEOUT_MS);
    if (body === 'too_large') return refuseAndClose(res, 413, 'body too large\n');
    if (body === 'timeout') return refuseAndClose(res, 408, 'body too slow\n');
    const raw = body.toString('utf8');
    const valid = isValidSlackRequest({
      signingSecret: this.o.signingSecret,
      body: raw,
      headers: { 'x-slack-signature': signature, 'x-slack-request-timestamp': timestamp },
    });
    if (!valid) return refuse();
    let parsed: Record<string, unknown>;
    try {
      // Interactivity (button clicks) arrives form-encoded, its JSON in `payload`.
      const form = String(req.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded') ? new URLSearchParams(raw).get('payload') : null;
      parsed = JSON.parse(form ?? raw) as Record<string, unknown>;
    } catch {
      return void res.writeHead(400).end();
    }
    const bad = malformedEnvelope(parsed);
    if (bad) {
      this.o.log.debug({ reason: bad }, 'malformed Slack request acknowledged and dropped');
      return void res.writeHead(200).end();
    }
    if (parsed.type === 'url_verification') return sendJson(res, 200, { challenge: parsed.challenge });
    const retry = Number(req.headers['x-slack-retry-num']);
    try {
      await processThenAck(this.#app!, parsed, async () => void res.writeHead(200).end(), Number.isFinite(retry) ? retry : undefined);
    } catch (err) {
      this.o.log.warn({ err }, 'Slack event not stored; answering 503 so Slack retries');
      if (!res.headersSent) res.writeHead(503).end();
    }
  }
}
