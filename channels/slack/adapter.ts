import boltApp from '@slack/bolt/dist/App.js';
import { LogLevel, WebClient } from '@slack/web-api';
import type { Button, ChannelAdapter, ChannelCapabilities, Deliver, NativeStream, TransportOptions } from '../../src/contracts/channel.js';
import { checkSize, fetchLimited } from '../../src/util/download.js';
import type { Attachment, MessageRef, ReplyTarget } from '../../src/contracts/message.js';
import { ChannelError, CodedError, errorMessage } from '../../src/contracts/errors.js';
import type { HttpRoutes } from '../../src/contracts/http.js';
import type { Logger } from 'pino';
import { untilAborted } from '../../src/util/abortable.js';
import { DEFAULT_REQUEST_TIMEOUT_MS, platformCaller, type PlatformCall } from '../../src/util/platform-call.js';
import { classifySlackError, isSlackAnswer } from './errors.js';
import { markdownToMrkdwn } from './mrkdwn.js';
import { BUTTON_ACTION, BUTTON_ACTION_PREFIX, normalizeAction, normalizeEvent, type SlackBlockActions, type SlackEvent } from './normalize.js';
import { markdownForSlack, MARKDOWN_REFUSALS } from './markdown.js';
import { DeferredAckHttpReceiver, DeferredAckSocketReceiver } from './receiver.js';
import { SlackRecipients } from './recipients.js';
import { openSlackStream } from './stream.js';
import { agentFetch } from '../../src/util/agent-fetch.js';

/**
 * Bolt's App from its own module. The package's index also loads the Express and AWS Lambda
 * receivers (express, body-parser, mime-db and the rest), which channeld never uses: about a
 * third of what loading Bolt costs, on every start with a Slack channel (docs/PERFORMANCE.md).
 * Node and the bundle give a CommonJS module's `module.exports` as its default import (the
 * class is its `default`); vitest gives the class itself.
 */
type BoltApp = typeof boltApp.default;
const App: BoltApp = (boltApp as { default?: BoltApp }).default ?? (boltApp as unknown as BoltApp);

/**
 * Newer-method failures (markdown_text, native streams) without a Slack answer saying why,
 * in a row, after which this channel stops using them.
 */
export const NEWER_METHOD_STRIKES = 3;

/** The text as a section, and the buttons (if any) as an actions block; each button's value is its command. */
function buttonBlocks(mrkdwn: string, buttons: readonly Button[]) {
  return [
    { type: 'section', text: { type: 'mrkdwn', text: mrkdwn.slice(0, 3000) } },
    ...(buttons.length
      ? [
          {
            type: 'actions',
            elements: buttons.map((b, i) => ({
              type: 'button',
              action_id: `${BUTTON_ACTION_PREFIX}_${i}`,
              text: { type: 'plain_text', text: b.label },
              value: b.data,
              ...(b.style ? { style: b.style } : {}),
            })),
          },
        ]
      : []),
  ];
}

export interface SlackOptions {
  id: string;
  mode: 'socket' | 'http';
  apiUrl: string;
  replyInThread: boolean;
  nativeStream: boolean;
  http: HttpRoutes;
  log: Logger;
  /** How long one Web API call may take before it is cut (CHANNEL_REQUEST_TIMEOUT); 30 s by default. */
  requestTimeoutMs?: number;
  /** The longest pause between Socket Mode connect attempts; RECONNECT_MAX_DELAY_MS (30 s) by default. */
  reconnectMaxDelayMs?: number;
}

export interface SlackSecrets {
  botToken: string;
  appToken?: string;
  signingSecret?: string;
}

const EMOJI_NAMES: Record<string, string> = {
  '👀': 'eyes',
  '👍': '+1',
  '✅': 'white_check_mark',
  '⏳': 'hourglass_flowing_sand',
  '🤔': 'thinking_face',
  '👌': 'ok_hand',
  '🙏': 'pray',
  '🔥': 'fire',
  '✍️': 'writing_hand',
  '✍': 'writing_hand',
};

/** Slack's name for an emoji: `eyes`, `:eyes:`, or a mapped Unicode emoji. */
export function slackEmojiName(emoji: string): string {
  return EMOJI_NAMES[emoji] ?? emoji.replace(/^:|:$/g, '');
}

/** Slack through Bolt: Socket Mode or HTTP events in, chat.* (and chat streams) out. */
export class SlackAdapter implements ChannelAdapter {
  readonly capabilities: ChannelCapabilities;
  /** `channeld upgrade`: Slack spreads a bot's events over its open sockets, so the new process connects before this one closes. */
  readonly upgradeOverlap = true;
  readonly #o: SlackOptions;
  readonly #s: SlackSecrets;
  readonly #web: WebClient;
  /** Each Web API call: cut by its signal or the request timeout, failures sorted by classifySlackError. */
  readonly #call: PlatformCall;
  #botUserId: string | undefined;
  #botName: string | undefined;
  /** Messages go as `markdown_text` until Slack refuses it once (or fails it NEWER_METHOD_STRIKES times); then as mrkdwn `text`. */
  #markdown = true;
  #markdownStrikes = 0;
  /** Native streams (chat.startStream…) until Slack fails them NEWER_METHOD_STRIKES times in a row. */
  #stream: boolean;
  #streamStrikes = 0;
  /** Each delivered message's sender, for the recipient a channel stream needs. */
  readonly #recipients = new SlackRecipients();
  /** The bot's workspace (auth.test): the recipient's team when only the sender's id is known. */
  #teamId: string | undefined;
  /** Stops of streams whose replies were cut (channels/slack/stream.ts), each bounded: close waits for them. */
  readonly #abandoned = new Set<Promise<void>>();

  constructor(options: SlackOptions, secrets: SlackSecrets) {
    this.#o = options;
    this.#s = secrets;
    this.#stream = options.nativeStream;
    const timeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.#call = platformCaller(classifySlackError, timeoutMs);
    // Our own client for replies: 429s come back to ReplyStream (with retry-after) instead of
    // being waited out inside the SDK. Its methods take no abort signal, so #call cuts the
    // wait; the client's own timeout (a little later, so #call's is the one reported) then
    // ends the HTTP request and frees its place in the client's request queue.
    this.#web = new WebClient(secrets.botToken, {
      slackApiUrl: options.apiUrl,
      rejectRateLimitedCalls: true,
      retryConfig: { retries: 0 },
      logLevel: LogLevel.ERROR,
      timeout: timeoutMs + 1000,
      // Keep-alive undici instead of global fetch: a third of the client CPU per call.
      fetch: agentFetch,
    });
    this.capabilities = {
      maxMessageLength: 4000,
      editsDrafts: true,
      minEditIntervalMs: 1200, // chat.update is Tier 3, about 50 a minute
      nativeStream: options.nativeStream,
      typing: false,
    };
  }

  get id(): string {
    return this.#o.id;
  }
  get selfId(): string | undefined {
    return this.#botUserId;
  }
  get selfName(): string | undefined {
    return this.#botName;
  }

  async listen(deliver: Deliver, signal: AbortSignal, onConnected: () => void, onReconnecting?: (reason: string) => void): Promise<void> {
    const auth = await this.#call('auth.test', signal, () => this.#web.auth.test());
    this.#botUserId = auth.user_id;
    this.#botName = auth.user;
    this.#teamId = auth.team_id;
    let connected = false;
    const receiver =
      this.#o.mode === 'socket'
        ? new DeferredAckSocketReceiver({
            appToken: this.#s.appToken!,
            slackApiUrl: this.#o.apiUrl,
            log: this.#o.log,
            onConnected: () => connected && onConnected(),
            onReconnecting: (r) => onReconnecting?.(r),
            ...(this.#o.reconnectMaxDelayMs ? { reconnectMaxDelayMs: this.#o.reconnectMaxDelayMs } : {}),
          })
        : new DeferredAckHttpReceiver({ path: `/webhooks/${this.#o.id}`, signingSecret: this.#s.signingSecret!, http: this.#o.http, log: this.#o.log });
    const app = new App({
      token: this.#s.botToken,
      receiver,
      botUserId: auth.user_id!,
      ...(auth.bot_id ? { botId: auth.bot_id } : {}),
      clientOptions: { slackApiUrl: this.#o.apiUrl },
      logLevel: LogLevel.ERROR,
      tokenVerificationEnabled: false,
    });
    const handle = async ({ event }: { event: unknown }) => {
      const e = event as SlackEvent;
      const msg = normalizeEvent(e, this.#o.id, this.#botUserId!, this.#o.replyInThread);
      if (!msg) return;
      this.#recipients.remember(msg, e.user_team ?? e.team ?? auth.team_id);
      await deliver(msg);
    };
    app.event('message', handle);
    app.event('app_mention', handle);
    // A Block Kit button click (block_actions) is the clicker's message; the envelope (or the
    // HTTP request) is acknowledged once it is stored, as for events.
    app.action({ action_id: BUTTON_ACTION }, async ({ body, action, ack }) => {
      await ack();
      const b = body as unknown as SlackBlockActions;
      const msg = normalizeAction(b, action as unknown as SlackBlockActions['actions'][number], this.#o.id);
      if (!msg) return;
      this.#recipients.remember(msg, b.user.team_id ?? b.team?.id ?? auth.team_id);
      await deliver(msg);
    });
    // A listener that throws (the inbox could not store) must reach our receiver un-acked.
    app.error(async (err) => {
      throw err;
    });
    const what = this.#o.mode === 'socket' ? 'apps.connections.open' : 'start';
    const fail = (err: unknown) => Promise.reject(classifySlackError(err, what));
    // Socket Mode reconnects by itself; a reconnect that fails for good (a token revoked while
    // connected, the connect retries spent) ends the listener with that error.
    const failed = receiver instanceof DeferredAckSocketReceiver ? [receiver.failed] : [];
    try {
      // A stop or reload during an outage does not wait out the SDK's connect retries.
      const started = await Promise.race([receiver.start().then(() => true), untilAborted(signal).then(() => false), ...failed]).catch(fail);
      if (!started) return;
      connected = true;
      onConnected();
      await Promise.race([untilAborted(signal), ...failed]).catch(fail);
    } finally {
      await receiver.stop().catch(() => {});
    }
  }

  /** Replies go in the thread: the message's thread, or (reply_in_thread) a new one under it. */
  #threadTs(target: ReplyTarget): string | undefined {
    if (target.threadId) return target.threadId;
    if (!this.#o.replyInThread || !target.replyToMessageId) return undefined;
    return target.replyToMessageId.slice(target.replyToMessageId.lastIndexOf(':') + 1);
  }

  /** From url_private with `Authorization: Bearer <bot token>` (Slack's files:read); size checked first. */
  async download(a: Attachment, o: { maxBytes: number; signal: AbortSignal }): Promise<Buffer> {
    const name = a.name ?? a.type;
    checkSize(name, a.size, o.maxBytes);
    if (!a.url) throw new CodedError('ATTACHMENT_UNAVAILABLE', `Slack gave no url_private for ${name}`);
    return fetchLimited(a.url, {
      maxBytes: o.maxBytes,
      signal: o.signal,
      name,
      headers: { authorization: `Bearer ${this.#s.botToken}` },
      htmlMeansRefused: !a.mime?.includes('html'),
      refusedHint: 'does the token have files:read?',
    });
  }

  /**
   * Runs the markdown_text call; when Slack refuses that argument, remembers it for this
   * adapter and runs the mrkdwn call instead. Mentions are escaped on both paths. A failure
   * without a Slack answer saying why (an HTTP error status, a body that is not the Web
   * API's, no answer) also sends this message as mrkdwn; when that works it counts as a
   * strike, and at NEWER_METHOD_STRIKES in a row markdown_text is off (logged once). Slack's
   * own errors and rate limits are thrown as they are: mrkdwn would meet them too.
   */
  async #markdownOr<T>(what: string, signal: AbortSignal, markdown: () => Promise<T>, mrkdwn: () => Promise<T>): Promise<T> {
    if (!this.#markdown) return mrkdwn();
    try {
      const done = await markdown();
      this.#markdownStrikes = 0;
      return done;
    } catch (err) {
      const code = (err as { code?: string; data?: { error?: string } }).data?.error;
      if (code !== undefined && MARKDOWN_REFUSALS.has(code)) {
        this.#markdown = false;
        this.#o.log.info({ channel: this.#o.id, method: what, error: code }, 'Slack refused markdown_text; sending mrkdwn text from now on');
        return mrkdwn();
      }
      // Slack's answer, or a call already given up (timed out: it may still land): never a second message.
      if (isSlackAnswer(err) || signal.aborted) throw err;
      const done = await mrkdwn();
      const reason = errorMessage(classifySlackError(err, what));
      if (++this.#markdownStrikes < NEWER_METHOD_STRIKES) {
        this.#o.log.warn({ channel: this.#o.id, method: what, err: reason }, 'Slack failed a markdown_text message; sent as mrkdwn');
      } else if (this.#markdown) {
        this.#markdown = false;
        this.#o.log.warn({ channel: this.#o.id, method: what, err: reason }, 'this Slack API keeps failing markdown_text; sending mrkdwn text from now on');
      }
      return done;
    }
  }

  /**
   * A native stream call failed: a rate limit is only a pause, `unknown_method` (or an HTTP
   * 404) means the API has no streams, and other failures count as strikes; streams are off
   * for this channel from then on (logged once). The reply at hand falls back to post + update.
   */
  #streamFailed(err: unknown): void {
    if (!this.#stream || (err instanceof ChannelError && err.retryAfterMs !== undefined)) return;
    const cause = err instanceof ChannelError ? err.cause : err;
    const missing = (cause as { data?: { error?: string } }).data?.error === 'unknown_method' || (cause as { statusCode?: number }).statusCode === 404;
    if (!missing && ++this.#streamStrikes < NEWER_METHOD_STRIKES) return;
    this.#stream = false;
    this.#o.log.warn(
      { channel: this.#o.id, err: errorMessage(err), failures: this.#streamStrikes },
      'this Slack API fails native streams; posting and updating from now on',
    );
  }

  /** Runs one native stream call; its failure is counted against streams (see #streamFailed). */
  async #streamCall<T>(what: string, signal: AbortSignal, fn: () => Promise<T>): Promise<T> {
    try {
      const done = await this.#call(what, signal, fn);
      this.#streamStrikes = 0;
      return done;
    } catch (err) {
      if (!signal.aborted) this.#streamFailed(err);
      throw err;
    }
  }

  async send(target: ReplyTarget, text: string, options: TransportOptions): Promise<MessageRef> {
    const thread_ts = this.#threadTs(target);
    const base = { channel: target.chatId, ...(thread_ts ? { thread_ts } : {}), unfurl_links: false };
    // A message with buttons (an approval question) is Block Kit with mrkdwn text; others
    // go as standard Markdown where Slack takes it.
    const blocks = options.buttons?.length ? buttonBlocks(markdownToMrkdwn(text), options.buttons) : undefined;
    const r = await this.#call('chat.postMessage', options.signal, (signal) =>
      blocks
        ? this.#web.chat.postMessage({ ...base, text: markdownToMrkdwn(text), blocks })
        : this.#markdownOr(
            'chat.postMessage',
            signal,
            () => this.#web.chat.postMessage({ ...base, markdown_text: markdownForSlack(text) }),
            () => this.#web.chat.postMessage({ ...base, text: markdownToMrkdwn(text) }),
          ),
    );
    return { chatId: target.chatId, messageId: r.ts!, ...(thread_ts ? { threadId: thread_ts } : {}) };
  }

  async edit(ref: MessageRef, text: string, options: TransportOptions): Promise<void> {
    // A message that had buttons is rewritten as a plain section: the buttons are gone.
    if (options.buttons) {
      const mrkdwn = markdownToMrkdwn(text);
      const blocks = buttonBlocks(mrkdwn, options.buttons);
      await this.#call('chat.update', options.signal, () => this.#web.chat.update({ channel: ref.chatId, ts: ref.messageId, text: mrkdwn, blocks }));
      return;
    }
    await this.#call('chat.update', options.signal, (signal) =>
      this.#markdownOr(
        'chat.update',
        signal,
        () => this.#web.chat.update({ channel: ref.chatId, ts: ref.messageId, markdown_text: markdownForSlack(text) }),
        () => this.#web.chat.update({ channel: ref.chatId, ts: ref.messageId, text: markdownToMrkdwn(text) }),
      ),
    );
  }

  async delete(ref: MessageRef, options: TransportOptions): Promise<void> {
    await this.#call('chat.delete', options.signal, () => this.#web.chat.delete({ channel: ref.chatId, ts: ref.messageId }));
  }

  /**
   * reactions.add / reactions.remove: Slack has no typing indicator for bots, so this is the
   * early sign there. Slack names its emoji (`eyes`); a few common ones are mapped from Unicode.
   */
  async setReaction(ref: MessageRef, emoji: string, on: boolean, options: TransportOptions): Promise<void> {
    const name = slackEmojiName(emoji);
    const timestamp = ref.messageId.slice(ref.messageId.lastIndexOf(':') + 1);
    await this.#call(on ? 'reactions.add' : 'reactions.remove', options.signal, async () => {
      try {
        await (on ? this.#web.reactions.add({ channel: ref.chatId, timestamp, name }) : this.#web.reactions.remove({ channel: ref.chatId, timestamp, name }));
      } catch (err) {
        // Already there, or already gone: the state we wanted.
        if ((err as { data?: { error?: string } }).data?.error === (on ? 'already_reacted' : 'no_reaction')) return;
        throw err;
      }
    });
  }

  /** Slack has no typing indicator for bots outside assistant threads. */
  async typing(): Promise<void> {}

  /**
   * chat.startStream / appendStream / stopStream (channels/slack/stream.ts), in threads only.
   * Outside a DM Slack streams only to a named recipient: the sender of the message answered,
   * with their team as this process saw it deliver the message, else the target's sender in
   * the bot's workspace (a turn run again after a restart, or on another cluster instance);
   * with neither the reply posts and edits instead of starting a stream Slack would refuse.
   */
  async openNativeStream(target: ReplyTarget, options: TransportOptions): Promise<NativeStream | undefined> {
    const thread_ts = this.#threadTs(target);
    if (!this.#stream || !thread_ts) return undefined;
    const recipient =
      this.#recipients.of(target) ?? (target.senderId && this.#teamId ? { recipient_user_id: target.senderId, recipient_team_id: this.#teamId } : undefined);
    if (!recipient && target.chatType !== 'dm') return undefined;
    const deps = {
      web: this.#web,
      call: this.#call,
      streamCall: <T>(what: string, signal: AbortSignal, fn: () => Promise<T>) => this.#streamCall(what, signal, fn),
      edit: (ref: MessageRef, text: string, o: TransportOptions) => this.edit(ref, text, o),
      log: this.#o.log,
      abandoned: this.#abandoned,
    };
    return openSlackStream(deps, { channel: target.chatId, thread_ts, recipient }, options);
  }

  /** Dropped for good (a reload, the exit): waits for the stops of streams whose replies were cut, each bounded, so an exit does not cut them. */
  async close(): Promise<void> {
    await Promise.all(this.#abandoned);
  }
}
