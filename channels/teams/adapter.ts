import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { ChannelAdapter, ChannelCapabilities, Deliver, NativeStream, SentAt, TransportOptions } from '../../src/contracts/channel.js';
import { errorMessage } from '../../src/contracts/errors.js';
import type { HttpRoutes } from '../../src/contracts/http.js';
import type { Attachment, MessageRef, ReplyTarget } from '../../src/contracts/message.js';
import { settleWithin, untilAborted } from '../../src/util/abortable.js';
import { checkSize, fetchLimited } from '../../src/util/download.js';
import { BODY_TIMEOUT_MS, readBody, refuseAndClose } from '../../src/util/http-helpers.js';
import { platformCaller } from '../../src/util/platform-call.js';
import { notingSent } from '../../src/util/dispatch-answer.js';
import { connectorVerifier, fetchOpenIdMetadata, sameServiceUrl, TokenRefused } from './auth.js';
import { buttonsCard, neutraliseMentions } from './cards.js';
import { classifyTeamsError, connectorCall } from './connector.js';
import { ServiceUrls } from './conversations.js';
import { activityIdOf, malformedActivity, normalizeActivity, TEAMS_CHANNEL_ID, tenantOf, type Activity } from './normalize.js';
import { StoppedAnswers } from './stop.js';
import { openTeamsStream, RELEASED_FINAL_TIMEOUT_MS, releasedKey } from './stream.js';
import { BotToken } from './token.js';

export interface TeamsOptions {
  id: string;
  appId: string;
  tenantId: string | undefined;
  openIdMetadataUrl: string;
  tokenUrl: string;
  http: HttpRoutes;
  stateDir: string;
  log: Logger;
}

/** Activities are small; anything larger is not one. */
const MAX_BODY_BYTES = 256 * 1024;
/** Teams takes about 28 KB per message; the text is kept well under it. */
export const MAX_MESSAGE_CHARS = 10_000;

const enc = encodeURIComponent;

/** Microsoft Teams through the Bot Framework: verified activities in, Connector REST out. */
export class TeamsAdapter implements ChannelAdapter {
  readonly capabilities: ChannelCapabilities = {
    maxMessageLength: MAX_MESSAGE_CHARS,
    editsDrafts: true,
    // Teams allows about one streaming update per second, and throttles bursts of edits.
    minEditIntervalMs: 1500,
    nativeStream: true,
    typing: true,
    typingRefreshMs: 3000,
  };
  readonly #o: TeamsOptions;
  readonly #token: BotToken;
  readonly #urls: ServiceUrls;
  readonly #call = platformCaller(classifyTeamsError);
  readonly #stops = new StoppedAnswers();
  /** The ends of streams whose replies released them, by message (channels/teams/stream.ts): close and an update of that message wait for them. */
  readonly #abandoned = new Map<string | symbol, Promise<void>>();
  #botId: string | undefined;

  constructor(options: TeamsOptions, password: string) {
    this.#o = options;
    this.#token = new BotToken(options.tokenUrl, options.appId, password);
    this.#urls = new ServiceUrls(options.stateDir, options.id);
  }

  get id(): string {
    return this.#o.id;
  }
  get selfId(): string | undefined {
    return this.#botId;
  }

  async listen(deliver: Deliver, signal: AbortSignal, onConnected: () => void): Promise<void> {
    const identity = await fetchOpenIdMetadata(this.#o.openIdMetadataUrl, signal);
    // The app password is tried now, so a wrong one parks the channel instead of failing every reply.
    await this.#call('token', signal, (s) => this.#token.get(s));
    const verify = connectorVerifier(identity, this.#o.appId, TEAMS_CHANNEL_ID);
    const remove = this.#o.http.route('POST', `/webhooks/${this.#o.id}`, (req, res) => this.#activity(req, res, verify, deliver), {
      scheme: 'jwt',
      describe: 'Bot Connector JWT: signature, issuer, audience (app_id), expiry, key endorsed for msteams, serviceUrl; channelId msteams',
    });
    try {
      onConnected();
      await untilAborted(signal);
    } finally {
      remove();
    }
  }

  /**
   * One POSTed activity. The bearer token is verified before the body is read (its key must
   * be endorsed for Teams); the body's serviceUrl must be the one the token names, and its
   * channelId must be Teams' own. Anything else: 401 or 403, nothing stored. The answer is
   * 200 only once a message is in the inbox, so the Connector's retry of anything we could
   * not store is dropped by the inbox.
   */
  async #activity(req: IncomingMessage, res: ServerResponse, verify: ReturnType<typeof connectorVerifier>, deliver: Deliver): Promise<void> {
    // Every refusal closes the connection (Node destroys the socket once the answer is out):
    // most come before the body is read, whose unread rest would otherwise hold the socket.
    const refuse = (status: number, why: string) => {
      req.resume();
      this.#o.log.warn({ channel: this.#o.id, status, reason: why }, 'Teams activity refused');
      refuseAndClose(res, status, `${status === 401 ? 'unauthorized' : 'refused'}\n`);
    };
    let verified: Awaited<ReturnType<ReturnType<typeof connectorVerifier>>>;
    try {
      verified = await verify(req.headers.authorization);
    } catch (err) {
      if (err instanceof TokenRefused) return refuse(err.status, err.message);
      // The keys could not be fetched: the Connector tries again later.
      return refuse(503, `the signing keys are unavailable: ${errorMessage(err)}`);
    }
    const body = await readBody(req, MAX_BODY_BYTES, BODY_TIMEOUT_MS);
    if (body === 'timeout') return refuseAndClose(res, 408, 'body too slow\n');
    if (body === 'too_large') return refuse(413, 'the activity is too large');
    let activity: Activity;
    try {
      activity = JSON.parse(body.toString('utf8')) as Activity;
    } catch {
      return refuse(400, 'the body is not JSON');
    }
    const bad = malformedActivity(activity);
    if (bad) return refuse(400, bad);
    const { claims } = verified;
    if (!sameServiceUrl(claims.serviceurl ?? claims.serviceUrl, activity.serviceUrl)) return refuse(401, 'the serviceUrl is not the one the token names');
    if (activity.channelId !== TEAMS_CHANNEL_ID)
      return refuse(403, `the activity is from Bot Framework channel ${JSON.stringify(activity.channelId ?? null).slice(0, 64)}, not ${TEAMS_CHANNEL_ID}`);
    if (this.#o.tenantId && tenantOf(activity) !== this.#o.tenantId)
      return refuse(403, `the activity is from tenant ${tenantOf(activity) ?? 'unknown'}, not tenant_id`);
    if (typeof activity.recipient?.id === 'string') this.#botId = activity.recipient.id;
    if (typeof activity.conversation?.id === 'string') this.#urls.set(activity.conversation.id, activity.serviceUrl as string);
    const msg = normalizeActivity(activity, this.#o.id);
    try {
      if (msg) await deliver(msg);
      res.writeHead(200).end();
    } catch (err) {
      this.#o.log.warn({ err, channel: this.#o.id }, 'Teams activity not stored; the Connector will retry');
      res.writeHead(503).end();
    }
  }

  /** One Connector call; `sentAt`, when given, notes when its request went out (a reply's sends and edits; the token's own request goes through `fetch` and notes nothing). */
  #post<T>(
    what: string,
    chatId: string,
    path: string,
    body: unknown,
    signal: AbortSignal,
    method: 'POST' | 'PUT' | 'DELETE' = 'POST',
    sentAt?: SentAt,
  ): Promise<T> {
    return this.#call(
      what,
      signal,
      notingSent(sentAt, (s) => connectorCall<T>(this.#token, this.#urls.get(chatId), method, path, body, s)),
    );
  }

  #message(text: string, buttons: TransportOptions['buttons']): Record<string, unknown> {
    return {
      type: 'message',
      text: neutraliseMentions(text),
      textFormat: 'markdown',
      ...(buttons ? { attachments: buttons.length ? [buttonsCard(buttons)] : [] } : {}),
    };
  }

  async send(target: ReplyTarget, text: string, options: TransportOptions): Promise<MessageRef> {
    // The rest of an answer its user stopped (a chunk past the first) is not posted: the stop ends it.
    const stopped = this.#stops.stoppedReply(target);
    if (stopped) return stopped;
    const conv = `/v3/conversations/${enc(target.chatId)}/activities`;
    // In channels and group chats a reply goes under the message it answers.
    const replyTo = target.chatType !== 'dm' && target.replyToMessageId ? activityIdOf(target.replyToMessageId) : undefined;
    const sent = await this.#post<{ id?: string }>(
      'send',
      target.chatId,
      replyTo ? `${conv}/${enc(replyTo)}` : conv,
      { ...this.#message(text, options.buttons), ...(replyTo ? { replyToId: replyTo } : {}) },
      options.signal,
      'POST',
      options.sentAt,
    );
    return { chatId: target.chatId, messageId: sent.id ?? '' };
  }

  async edit(ref: MessageRef, text: string, options: TransportOptions): Promise<void> {
    if (this.#stops.isStopped(ref)) return;
    // A released stream of this message ends first (bounded): its final, landing after this update, would put its older text back.
    const ending = this.#abandoned.get(releasedKey(ref));
    if (ending) await settleWithin(ending, RELEASED_FINAL_TIMEOUT_MS, options.signal);
    await this.#post(
      'update',
      ref.chatId,
      `/v3/conversations/${enc(ref.chatId)}/activities/${enc(ref.messageId)}`,
      { ...this.#message(text, options.buttons), id: ref.messageId },
      options.signal,
      'PUT',
      options.sentAt,
    );
  }

  async delete(ref: MessageRef, options: TransportOptions): Promise<void> {
    if (this.#stops.isStopped(ref)) return;
    await this.#post('delete', ref.chatId, `/v3/conversations/${enc(ref.chatId)}/activities/${enc(ref.messageId)}`, undefined, options.signal, 'DELETE');
  }

  async typing(target: ReplyTarget, options: TransportOptions): Promise<void> {
    await this.#post('typing', target.chatId, `/v3/conversations/${enc(target.chatId)}/activities`, { type: 'typing' }, options.signal);
  }

  /** Teams' streaming protocol in 1:1 chats (channels/teams/stream.ts); elsewhere the reply posts and updates. */
  async openNativeStream(target: ReplyTarget): Promise<NativeStream | undefined> {
    if (target.chatType !== 'dm') return undefined;
    return openTeamsStream(
      {
        channel: this.#o.id,
        log: this.#o.log,
        post: (chatId, body, signal, requestSignal, sent) =>
          this.#call('stream', signal, () => {
            // Under the stream's bound, not the reply's signal: a request out when the reply is cut
            // may land all the same, and a released stream's final waits for it, not races it.
            const request = connectorCall<{ id?: string }>(
              this.#token,
              this.#urls.get(chatId),
              'POST',
              `/v3/conversations/${enc(chatId)}/activities`,
              body,
              requestSignal,
            );
            sent(request);
            return request;
          }),
        message: (text, buttons) => this.#message(text, buttons),
        send: (t, text, options) => this.send(t, text, options),
        edit: (ref, text, options) => this.edit(ref, text, options),
        stops: this.#stops,
        abandoned: this.#abandoned,
      },
      target,
    );
  }

  /** Waits for the finals of streams their replies released (each bounded), so an exit does not cut them. */
  async close(): Promise<void> {
    await Promise.all(this.#abandoned.values());
  }

  /** A file: a 1:1 chat's download link as it is; an inline image from the Connector with the bot's token. */
  async download(a: Attachment, o: { maxBytes: number; signal: AbortSignal }): Promise<Buffer> {
    const name = a.name ?? a.type;
    checkSize(name, a.size, o.maxBytes);
    const url = a.url ?? a.id;
    // The bot's token goes only to a Connector this channel was verified to talk to.
    const headers = a.type === 'image' && this.#urls.known(url) ? { authorization: `Bearer ${await this.#token.get(o.signal)}` } : undefined;
    return fetchLimited(url, { maxBytes: o.maxBytes, signal: o.signal, name, ...(headers ? { headers } : {}) });
  }
}
