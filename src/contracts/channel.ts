import type { z } from 'zod';
import type { HttpRoutes } from './http.js';
import type { Logger } from 'pino';
import type { Attachment, ChannelMessage, MessageRef, ReplyTarget } from './message.js';
import type { NativeStream } from './native-stream.js';
import type { SharedRecord } from './shared-record.js';
import type { Button, TransportOptions } from './transport.js';

export type { NativeStream, NativeStreamOptions, ToolProgress } from './native-stream.js';
export type { Button, SentAt, TransportOptions } from './transport.js';

/** What a platform can do; ReplyStream reads only this. */
export interface ChannelCapabilities {
  maxMessageLength: number;
  /**
   * How this platform splits a long reply into messages, where more than the length counts
   * (a platform whose rich messages also limit blocks); `chunkText` at `maxMessageLength` when absent.
   * Read on every plan, so a platform may change it mid-reply (a refused format).
   */
  split?(text: string): string[];
  editsDrafts: boolean;
  /** The platform's floor between edits of one message. */
  minEditIntervalMs: number;
  /**
   * The platform has a streaming draft of its own (`openNativeStream`); the stream uses it
   * where the adapter opens one and edits drafts otherwise.
   */
  nativeStream: boolean;
  typing: boolean;
  /** How long one typing indicator lasts, so it is refreshed in time. */
  typingRefreshMs?: number;
}

/** A file the bot sends (a spoken answer): its bytes in memory, bounded by the caller. */
export interface OutgoingFile {
  name: string;
  mime: string;
  bytes: Buffer;
  /** A voice note: the platform's own voice message where it has one (a Bot API's `sendVoice`), else a plain file. */
  voice?: boolean;
}

/**
 * A reply operation on a channel whose users are connected to one instance each (its
 * connections are instance-local): what the instance running the turn did, as the other
 * instances apply it to their own connections (cluster mode). `messageId` was made where the
 * turn runs, so the later edits of a message find it everywhere.
 */
export type RelayedReply =
  | { op: 'send'; target: ReplyTarget; messageId: string; text: string; final: boolean; buttons?: Button[] }
  | { op: 'edit'; ref: MessageRef; text: string; final: boolean; buttons?: Button[] }
  | { op: 'delete'; ref: MessageRef }
  | { op: 'typing'; target: ReplyTarget }
  | { op: 'finalize'; refs: MessageRef[] };

/**
 * Resolves once `msg` is durably in the inbox. Only then may the adapter ack the platform,
 * where the platform sends again what is not acked; where it never does and voids what is
 * not answered within seconds, the adapter answers at once and, if this rejects, tells the
 * user the message was not kept (docs/EXTENDING.md).
 * Resolves `false` when the message was refused before storage (self, bots, filters).
 * While the store cannot take writes the message is held and this resolves once it is
 * stored, possibly minutes later; it rejects (retryable) when it was not kept.
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
   * when an SDK that reconnects by itself (a gateway or socket client) lost its connection and
   * is getting it back: the supervisor shows that without restarting the listener.
   * `onStandby` (cluster mode): the listener waits for its lease while another instance runs it.
   */
  listen(
    deliver: Deliver,
    signal: AbortSignal,
    onConnected: () => void,
    onReconnecting?: (reason: string) => void,
    onStandby?: (detail: string) => void,
  ): Promise<void>;
  /**
   * A listener split into parts (ChannelDescriptor `listenerParts` > 1, e.g. gateway shards)
   * runs part `part` alone, with `listen`'s contract otherwise. Cluster mode leases each part
   * on its own and calls this; one node calls `listen`, which runs every part.
   */
  listenPart?(part: number, deliver: Deliver, signal: AbortSignal, onConnected: () => void, onReconnecting?: (reason: string) => void): Promise<void>;
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
   * Sends a file into the conversation (a spoken answer as a voice note). Optional: where a
   * kind has none, the daemon keeps to text and logs that the file was not sent.
   */
  sendFile?(target: ReplyTarget, file: OutgoingFile, options: TransportOptions): Promise<MessageRef>;

  /**
   * Puts `emoji` on a user's message as the bot's reaction (`on`), or takes it off. `ref` is
   * the user's message as the adapter delivered it (its `messageId` as in ChannelMessage).
   */
  setReaction?(ref: MessageRef, emoji: string, on: boolean, options: TransportOptions): Promise<void>;
  /**
   * What the operator should know about this channel beyond its state, one line each (a room
   * it refuses to serve, and why); /status lists them under the channel. Read on every /status.
   */
  notes?(): string[];
  /** A native stream for this target, or undefined where the platform has none for it (e.g. groups). */
  openNativeStream?(target: ReplyTarget, options: TransportOptions): Promise<NativeStream | undefined>;
  /**
   * Upgrade (`channeld upgrade`): what the new process needs to take this listener's session
   * over (a gateway's session id, sequence and resume URL), read once `listen` returned after
   * its signal aborted with UPGRADE_HANDED_OVER. Plain JSON, at most a few KiB. A listener
   * that runs in both processes for a moment (not exclusive, or `upgradeOverlap`) is asked
   * while it still runs, just before the old process stops it (web chat's tab backlogs).
   */
  handoverState?(): unknown;
  /**
   * Upgrade: this exclusive listener may run in the old and the new process for a moment
   * (a socket-mode platform spreads a bot's events over its open sockets), so the new one opens
   * before the old one closes instead of after.
   */
  readonly upgradeOverlap?: boolean;
  /**
   * Upgrade, a listener that ran in both processes: what the turns still running in the old
   * process added to its state after `handoverState` was read (replies sent where no user
   * listens any more), read once they all ended, before the adapter is closed; undefined when
   * nothing. The new process gets it through `resumeFrom`, while its own listener runs.
   */
  lateHandoverState?(): unknown;
  /**
   * Upgrade: the state the old process's adapter handed over, given before the first `listen`
   * (for a listener both processes ran: while it runs, once as the old one stops its listener
   * and once more with `lateHandoverState`).
   */
  resumeFrom?(state: unknown): void;
  /**
   * Declares the channel's connections instance-local (a page's sockets, each held by the
   * instance the user reached): a turn may run on another instance, so the topology relays
   * its reply operations (send, edit, delete, typing, finalize) to every instance, and each
   * applies them here to its own connections and what it keeps for them. Called only with
   * another instance's operations (this instance's own calls reach the adapter directly);
   * writes locally and never waits. Absent: the platform delivers replies from anywhere.
   */
  applyRelayed?(reply: RelayedReply): void;
  /**
   * Releases what the adapter holds for its whole life (a keep-alive connection pool, a
   * client). The daemon calls it once, when the adapter is dropped for good: after its
   * listener stopped, its turns settled and it left the channel table (a reload that removes
   * or restarts the channel, or shutdown after the drain), so no call comes after it. Final
   * replies may still be sent after `listen` returns, so nothing they need may be released
   * when it does. Rejecting is logged; the daemon goes on.
   */
  close?(): Promise<void>;
}

/** What the composition root hands a channel factory. */
export interface ChannelContext {
  /** The daemon's HTTP server, for webhooks and pages. */
  http: HttpRoutes;
  /** A resolved secret of this channel by base name (`token`, `app_token`, ...). */
  secret(base: string): string | undefined;
  log: Logger;
  /** The daemon's state_dir: the only place a channel may write files (uploads). */
  stateDir: string;
  /** The live `[limits] max_attachment_bytes` (for a channel that takes uploads itself). */
  maxAttachmentBytes: () => number;
  /** Counts entries a bounded in-memory structure evicted (`/metrics`: channeld_memory_evictions_total). */
  evicted?(structure: string, count: number): void;
  /** Where a channel that writes files itself (uploads) reports a write that failed for lack of room. */
  storage?: StorageReporter;
  /**
   * How long the inbox still drops a message delivered again as a duplicate: its retention on
   * one node, the shared stream's window in cluster mode. A listener that catches up on what
   * was posted while it was away reads nothing older (src/util/cursor-file.ts catchUpReachMs):
   * a message answered already would be answered twice.
   */
  duplicateWindowMs?: () => number;
  /**
   * Cluster mode: an exclusive listener runs wherever its lease is, so one that starts here
   * with no position of its own (a cursor, a sync token) may be taking over from another
   * instance that ran it until moments ago, or that was killed. It catches up on what was
   * posted within `duplicateWindowMs` (less the clock margin) instead of starting empty: what
   * the other instance stored meanwhile is dropped as a duplicate, what it never got is
   * answered. False or absent on one node: a first start answers nothing from before it.
   */
  listenerMoves?: boolean;
  /**
   * Cluster mode only: the record `name` of this channel's own that every instance reads and
   * writes (src/contracts/shared-record.ts): what a listener that moves between instances must
   * find wherever it runs next. Absent on one node, where the channel's own file is all there is.
   */
  sharedRecord?(name: string): SharedRecord;
}

/**
 * A file write the disk refused (`code` ENOSPC, EDQUOT, EIO, EROFS, EFBIG) counts in the
 * daemon's storage health as a failed database write does: `/status` storage turns degraded
 * until the database takes a write again, and channeld_storage_faults_total counts it by code.
 * `code` `QUOTA` (the channel's own storage quota used up) is counted in the metric only:
 * the disk still takes writes.
 */
export interface StorageReporter {
  report(err: Error & { code?: string }): void;
}

/** What a channel kind's `load()` resolves to: builds one channel's adapter from its config. */
export type ChannelFactory<C extends ChannelConfigBase = ChannelConfigBase> = (config: C, ctx: ChannelContext) => ChannelAdapter | Promise<ChannelAdapter>;

/**
 * What every channel's config has, whatever its kind adds. (The common keys: `enabled`,
 * `agent`, `allow_from`, ... are the core's; a factory reads only `id` and its own keys.)
 */
export interface ChannelConfigBase {
  /** The channel's `id` in its `[[channels]]` table. */
  id: string;
  /** The channel's kind. */
  type: string;
}

/** A channel's config as its kind's factory sees it: the base plus the kind's own keys. */
export type ChannelConfigOf<S extends z.ZodType> = ChannelConfigBase & z.output<S>;

/**
 * The secrets a channel needs, by base name (`token` is given as `token_env`, `token_file` or
 * `token_credential`). A missing required one is a config error; a missing optional one is not.
 */
export interface ChannelSecretNeeds {
  required: readonly string[];
  optional: readonly string[];
}

/** A problem a kind finds across its own table's keys; `path` is relative to the table. */
export interface ChannelConfigProblem {
  path: (string | number)[];
  message: string;
}

/**
 * Everything the daemon knows about a channel kind before loading it. Each
 * `channels/<kind>/` folder exports one; `channels/registry.ts` lists them and the entry
 * point hands that list to the CLI. The core never names a kind: config validation,
 * secrets, `check`, `--help`, cluster listener leases and start-up all read this.
 */
export interface ChannelDescriptor<C extends ChannelConfigBase = ChannelConfigBase> {
  /** The value of `type` in `[[channels]]`. */
  readonly kind: string;
  /** One line for `--help`. */
  readonly summary: string;
  /**
   * The channel table's own keys (besides the common ones and `type`), as a zod object; its
   * shape is merged into the strict config schema, so an unknown or invalid key is reported
   * with its file:line:col like any other. A secret `X` is written as three optional keys
   * `X_env`, `X_file`, `X_credential` (`secretRef` in src/contracts/secret-ref.ts writes them).
   */
  readonly config: z.ZodObject;
  readonly secrets: {
    /**
     * Every secret base name a table of this kind may carry. An inline `X = "..."` for any
     * registered kind's secret is refused as an inline secret, and a reload that changes one
     * restarts the channel.
     */
    readonly names: readonly string[];
    /** Which of them a channel with this config needs; checked by `check` and at start. */
    needs(config: C): ChannelSecretNeeds;
    /**
     * What a well-formed value of a secret looks like, by base name: `check` warns (never
     * refuses: platforms change formats) when a resolved value does not match, naming `expected`.
     */
    readonly shapes?: Readonly<Record<string, { pattern: RegExp; expected: string }>>;
  };
  /**
   * `allow_from` may be left out: whoever reaches this kind was let in already (a local page
   * behind the daemon's own HTTP server and its access token). Otherwise it is required.
   */
  readonly allowFromOptional?: boolean;
  /**
   * Cluster mode: whether this channel's listener may run on one instance at a time
   * (polling, gateway and socket listeners), so it runs under a lease. Webhook and page
   * listeners accept on every instance behind the load balancer.
   */
  exclusiveListener(config: C): boolean;
  /**
   * Cluster mode: into how many parts an exclusive listener splits (gateway shards), each
   * run by the adapter's `listenPart` under a lease of its own, so the parts spread over the
   * instances. Absent or 1: one lease for the whole listener.
   */
  listenerParts?(config: C): number;
  /**
   * The name of the page this kind serves at the daemon's root (`/`): `channeld run` logs
   * it with the URL when a channel of this kind is enabled.
   */
  readonly page?: string;
  /** Rules across this table's keys that its schema cannot say (a mode that needs another key). */
  problems?(config: C): ChannelConfigProblem[];
  /** Loads the implementation and its SDK; called only when a channel of this kind starts. */
  load(): Promise<ChannelFactory<C>>;
}

/**
 * Types a kind's descriptor against its own schema (the factory and the hooks see the kind's
 * keys) and returns it as the registry's element type. The cast is sound because the core
 * calls these functions only with configs its merged schema parsed for this kind.
 */
export function defineChannel<S extends z.ZodObject>(descriptor: ChannelDescriptor<ChannelConfigOf<S>> & { readonly config: S }): ChannelDescriptor {
  return descriptor as unknown as ChannelDescriptor;
}
