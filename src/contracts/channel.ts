import type { HttpRoutes } from './http.js';
import type { Logger } from 'pino';
import type { Attachment, ChannelMessage, MessageRef, ReplyTarget } from './message.js';

/** What a platform can do; ReplyStream reads only this. */
export interface ChannelCapabilities {
  maxMessageLength: number;
  /**
   * How this platform splits a long reply into messages, where more than the length counts
   * (Telegram rich messages also limit blocks); `chunkText` at `maxMessageLength` when absent.
   * Read on every plan, so a platform may change it mid-reply (a refused format).
   */
  split?(text: string): string[];
  editsDrafts: boolean;
  /** The platform's floor between edits of one message. */
  minEditIntervalMs: number;
  nativeStream: 'none' | 'telegram-draft' | 'slack-stream';
  typing: boolean;
  /** How long one typing indicator lasts, so it is refreshed in time. */
  typingRefreshMs?: number;
}

/**
 * A button under a message (approval questions). `data` is the command text a click sends
 * back as the clicker's message, e.g. `/approve 3fa9c1`; it fits Telegram's 64-byte limit.
 */
export interface Button {
  label: string;
  data: string;
  style?: 'primary' | 'danger';
}

export interface TransportOptions {
  /**
   * Cuts the request: the adapter rejects with the signal's reason as soon as it aborts,
   * whether or not its client can cancel the request itself. Required, so every caller
   * decides what bounds its calls (a turn's stop, the daemon's hard stop, a time limit).
   */
  signal: AbortSignal;
  /** This is the turn's last write to this message (web chat marks it final). */
  final?: boolean;
  /**
   * Stable across restarts for the same reply message (the user's message id and the chunk
   * index). Platforms with idempotent sends (Discord's nonce) use it so a re-run after a
   * crash cannot post the same message twice.
   */
  idempotencyKey?: string;
  /** Buttons to show under the message; on an edit, `[]` removes the ones it had. */
  buttons?: Button[];
}

/**
 * A platform's own streaming draft (Telegram sendMessageDraft, Slack chat streams). The
 * stream always passes the whole text so far; an adapter whose platform appends sends
 * only what is new.
 */
export interface NativeStream {
  update(text: string, options: TransportOptions): Promise<void>;
  /** Ends the stream with the full text (at most one message long); returns the message that holds it. */
  finish(text: string, options: TransportOptions): Promise<MessageRef>;
}

/**
 * Resolves once `msg` is durably in the inbox. Only then may the adapter ack the platform.
 * Resolves `false` when the message was refused before storage (self, bots, filters).
 */
export type Deliver = (msg: ChannelMessage) => Promise<boolean>;

/**
 * Implemented once per platform in `channels/<kind>/`. Every transport call takes an
 * AbortSignal and is bounded in time by the adapter (CHANNEL_REQUEST_TIMEOUT), so a hung
 * platform cannot hold a turn; a 429 surfaces as a ChannelError with `retryAfterMs`.
 */
export interface ChannelAdapter {
  readonly id: string;
  readonly capabilities: ChannelCapabilities;
  /** The bot's own user id once connected, for loop protection. */
  readonly selfId: string | undefined;
  /** The bot's username once connected, for `/cmd@botname`. */
  readonly selfName?: string | undefined;
  /**
   * Runs the listener: lasts as long as it runs, resolves on a clean stop after `signal`
   * aborts, rejects with a ChannelError whose `retryable` decides what the supervisor does.
   * Calls `onConnected` each time a platform session is established, and `onReconnecting`
   * when an SDK that reconnects by itself (discord.js, Socket Mode) lost its connection and
   * is getting it back: the supervisor shows that without restarting the listener.
   * `onStandby` (cluster mode): the listener waits for its lease while another instance runs it.
   */
  listen(deliver: Deliver, signal: AbortSignal, onConnected: () => void, onReconnecting?: (reason: string) => void, onStandby?: (detail: string) => void): Promise<void>;
  send(target: ReplyTarget, text: string, options: TransportOptions): Promise<MessageRef>;
  edit(ref: MessageRef, text: string, options: TransportOptions): Promise<void>;
  delete(ref: MessageRef, options: TransportOptions): Promise<void>;
  typing(target: ReplyTarget, options: TransportOptions): Promise<void>;
  /** The turn's reply is complete: platforms with a visible draft state mark these messages final. */
  finalize?(refs: readonly MessageRef[], options: TransportOptions): Promise<void>;
  /**
   * The bytes of an attachment, through the platform's API with the bot's credentials.
   * Refuses with ATTACHMENT_TOO_LARGE, before the transfer where the size is known and as
   * soon as `maxBytes` is passed otherwise; never writes to disk.
   */
  download?(attachment: Attachment, options: { maxBytes: number; signal: AbortSignal }): Promise<Buffer>;

  /**
   * Puts `emoji` on a user's message as the bot's reaction (`on`), or takes it off. `ref` is
   * the user's message as the adapter delivered it (its `messageId` as in ChannelMessage).
   */
  setReaction?(ref: MessageRef, emoji: string, on: boolean, options: TransportOptions): Promise<void>;
  /** A native stream for this target, or undefined where the platform has none for it (e.g. groups). */
  openNativeStream?(target: ReplyTarget, options: TransportOptions): Promise<NativeStream | undefined>;
}

/** What the composition root hands a channel factory. */
export interface ChannelContext {
  /** The daemon's HTTP server, for webhooks and pages. */
  http: HttpRoutes;
  /** A resolved secret of this channel by base name (`token`, `app_token`, ...). */
  secret(base: string): string | undefined;
  log: Logger;
  /** The daemon's state_dir: the only place a channel may write files (web chat uploads). */
  stateDir: string;
  /** The live `[limits] max_attachment_bytes` (web chat uploads). */
  maxAttachmentBytes: () => number;
  /** Counts entries a bounded in-memory structure evicted (`/metrics`: channeld_memory_evictions_total). */
  evicted?(structure: string, count: number): void;
}

/** Each `channels/<kind>/index.ts` exports one of these as `createChannel`. */
export type ChannelFactory<C extends ChannelConfigBase = ChannelConfigBase> = (config: C, ctx: ChannelContext) => ChannelAdapter | Promise<ChannelAdapter>;

/** What every channel's config has, whatever its kind adds. */
export interface ChannelConfigBase {
  /** The channel's alias in the config (`[channels.NAME]`). */
  id: string;
  /** The channel's kind. */
  type: string;
}

/** The secrets a channel needs, by base name (`token` is given as `token_env`, `token_file` or `token_credential`). */
export interface ChannelSecretNeeds {
  required: readonly string[];
  optional: readonly string[];
}

/**
 * Everything the daemon knows about a channel kind before loading it. Each
 * `channels/<kind>/` folder exports one; `channels/registry.ts` lists them. The core never
 * names a kind: config validation, secrets, `check`, `--help` and start-up all read this.
 */
export interface ChannelDescriptor<C extends ChannelConfigBase = ChannelConfigBase> {
  /** The value of `type` in `[channels.NAME]`. */
  readonly kind: string;
  /** One line for `--help` and `channeld check`. */
  readonly summary: string;
  /**
   * The channel table's own keys (besides `type`), as a strict zod object. It is merged into
   * the config schema, so an unknown or invalid key is reported with its file:line:col.
   */
  readonly config: import('zod').ZodType<Omit<C, 'id'>>;
  /** Which secrets a channel with this config needs; checked by `check` and at start. */
  secrets(config: C): ChannelSecretNeeds;
  /** Loads the implementation and its SDK; called only when a channel of this kind runs. */
  load(): Promise<ChannelFactory<C>>;
}
