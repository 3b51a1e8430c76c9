import { createHash } from 'node:crypto';
import { ButtonStyle, Client, ComponentType, GatewayIntentBits, type Message, Partials, REST, Routes, SimpleShardingStrategy } from 'discord.js';
import type { Button, ChannelAdapter, ChannelCapabilities, Deliver, OutgoingFile, TransportOptions } from '../../src/contracts/channel.js';
import type { SharedRecord } from '../../src/contracts/shared-record.js';
import { checkSize, fetchLimited } from '../../src/util/download.js';
import type { Attachment, MessageRef, ReplyTarget } from '../../src/contracts/message.js';
import { CodedError, errorMessage } from '../../src/contracts/errors.js';
import type { Logger } from 'pino';
import { untilAborted } from '../../src/util/abortable.js';
import { chunkText } from '../../src/util/chunk.js';
import { catchUpReachMs } from '../../src/util/cursor-file.js';
import { linkAbort, unlinkAbort } from '../../src/util/linked-abort.js';
import { platformCaller } from '../../src/util/platform-call.js';
import { CATCH_UP_MAX_AGE_MS, catchUp } from './catch-up.js';
import { catchUpOnReady, type ListenCursor, openListenCursor } from './cursor.js';
import { type KnownDmChannels, knownDmChannels } from './dm-channels.js';
import { takeClick } from './clicks.js';
import { classifyClose, classifyDiscordError, isEnforceNonceRefused, isServerFailure } from './errors.js';
import { GatewayHandover, parseHandover, type DiscordHandover } from './handover.js';
import { boundedCaches, cacheSizes, forgetDmChannel } from './caches.js';
import { markdownForDiscord } from './markdown.js';
import { normalizeButton, normalizeMessage } from './normalize.js';

export interface DiscordOptions {
  id: string;
  restApi: string;
  guilds: readonly string[];
  /** Gateway shards (`shards` in the config); 1 (the default) is an unsharded bot. */
  shards?: number;
  log: Logger;
  /** The cursor (the newest stored message's creation time) under the state dir, a `listenPart` one of its own; none (tests): no catch-up. */
  cursorFile?: string;
  /** The inbox's duplicate window (ChannelContext.duplicateWindowMs): a catch-up reads nothing older. */
  duplicateWindowMs?: () => number;
  /** ChannelContext.listenerMoves: with no cursor of its own, a run catches up on that window. */
  listenerMoves?: boolean;
  /** Cluster mode: the DM channels' list every instance reads (ChannelContext.sharedRecord, dm-channels.ts). */
  sharedDmChannels?: SharedRecord;
}

/** Sends carrying `enforce_nonce` that failed with a 5xx in a row before one is tried without it (#enforcedOr). */
export const ENFORCE_NONCE_STRIKES = 3;

/** Discord nonces are at most 25 characters: a hash of the key fits and stays stable. */
function nonceOf(key: string): string {
  return createHash('sha256').update(key).digest('base64url').slice(0, 25);
}

/** One action row of buttons; `custom_id` carries the command a click sends (at most 100 characters). */
function buttonRow(buttons: readonly Button[]) {
  return [
    {
      type: ComponentType.ActionRow,
      components: buttons.map((b) => ({
        type: ComponentType.Button,
        style: b.style === 'danger' ? ButtonStyle.Danger : ButtonStyle.Primary,
        label: b.label,
        custom_id: b.data,
      })),
    },
  ];
}

/** What Discord answers a message post with, as far as the adapter reads it. */
interface SentMessage {
  id: string;
  content?: string;
}

/** Model output can never ping anyone: no @everyone, @here, roles, users or reply pings. */
const NO_MENTIONS = { parse: [], replied_user: false } as const;

/**
 * Discord through discord.js: the gateway client for messages in (it resumes and reconnects
 * by itself; fatal close codes end the listener), and a REST client of the adapter's own for
 * replies, so final texts still land while the gateway reconnects or stops. REST does not
 * depend on shards: any instance replies to any shard's messages.
 *
 * With `shards` > 1, `listen` runs every shard in one discord.js Client (one node: its
 * WebSocketManager paces the IDENTIFYs by max_concurrency), and `listenPart(i)` runs shard `i`
 * alone (cluster mode: each shard is leased on its own, so they spread over the instances).
 * After a fresh IDENTIFY (not a RESUME) a shard catches up over REST on what was posted
 * since the cursor (catch-up.ts).
 */
export class DiscordAdapter implements ChannelAdapter {
  readonly capabilities: ChannelCapabilities = {
    maxMessageLength: 2000,
    editsDrafts: true,
    // Split on the text as sent (a table grows by its padding), so each piece fits a message.
    split: (text) => chunkText(markdownForDiscord(text), 2000),
    minEditIntervalMs: 1000, // about 5 edits per 5 s per channel
    nativeStream: false,
    typing: true,
    typingRefreshMs: 8000, // typing lasts about 10 s
  };
  readonly #o: DiscordOptions;
  readonly #token: string;
  readonly #rest: REST;
  /** Each REST request: cut by its signal or the request timeout, failures sorted by classifyDiscordError. */
  readonly #call = platformCaller(classifyDiscordError);
  #self: { id: string; name: string } | undefined;
  /**
   * Sends carry `enforce_nonce` (Discord returns the first message for a repeated nonce) until the server
   * refuses it, or fails ENFORCE_NONCE_STRIKES sends with it in a row while they work without (#enforcedOr).
   */
  #enforceNonce = true;
  #enforceNonceStrikes = 0;
  /** `channeld upgrade`: the sessions the old process handed over (resumed by the next listen), and what this one hands on. */
  #resumeFrom: DiscordHandover | undefined;
  #handingOver: DiscordHandover | undefined;
  /** The gateway clients listening now (one per `listenPart` in cluster mode), for cacheSizes(). */
  readonly #clients = new Set<Client>();
  /** DM channels messages came from, the newest first, kept beside the cursor: a catch-up reads them. */
  readonly #dmChannels: KnownDmChannels;

  constructor(options: DiscordOptions, token: string) {
    this.#o = options;
    this.#token = token;
    this.#dmChannels = knownDmChannels(options);
    // Edits that hit a rate limit are refused to us (with retry-after) instead of queued, so
    // ReplyStream can widen its interval; sends wait in discord.js's queue as usual.
    this.#rest = new REST({ api: options.restApi, rejectOnRateLimit: (r) => r.method === 'PATCH' || r.method === 'patch' }).setToken(token);
  }

  get id(): string {
    return this.#o.id;
  }

  resumeFrom(state: unknown): void {
    this.#resumeFrom = parseHandover(state);
    if (this.#resumeFrom) this.#self = { id: this.#resumeFrom.user.id, name: this.#resumeFrom.user.username };
  }

  handoverState(): unknown {
    const state = this.#handingOver;
    this.#handingOver = undefined;
    return state;
  }
  get selfId(): string | undefined {
    return this.#self?.id;
  }
  get selfName(): string | undefined {
    return this.#self?.name;
  }

  /** What discord.js holds in its caches now, summed over the live clients (see caches.ts); undefined when not listening. */
  cacheSizes(): ReturnType<typeof cacheSizes> | undefined {
    const all = [...this.#clients].map(cacheSizes);
    if (!all.length) return undefined;
    return all.reduce((sum, one) => {
      for (const k of Object.keys(sum) as Array<keyof typeof sum>) sum[k] += one[k];
      return sum;
    });
  }

  listen(deliver: Deliver, signal: AbortSignal, onConnected: () => void, onReconnecting?: (reason: string) => void): Promise<void> {
    const all = Array.from({ length: this.#o.shards ?? 1 }, (_, i) => i);
    return this.#run(all, deliver, signal, onConnected, onReconnecting);
  }

  /** Shard `part` of `shards` alone: the gateway sends it the events of its guilds only (DMs go to shard 0). */
  listenPart(part: number, deliver: Deliver, signal: AbortSignal, onConnected: () => void, onReconnecting?: (reason: string) => void): Promise<void> {
    return this.#run([part], deliver, signal, onConnected, onReconnecting);
  }

  async #run(shards: number[], deliver: Deliver, signal: AbortSignal, onConnected: () => void, onReconnecting?: (reason: string) => void): Promise<void> {
    const owed = this.#resumeFrom?.catchUpOwed === true;
    const takeoverReachMs = this.#o.listenerMoves ? catchUpReachMs(CATCH_UP_MAX_AGE_MS, this.#o.duplicateWindowMs) : 0;
    const onError = (err: unknown) => this.#o.log.warn({ err, channel: this.#o.id }, 'could not store the Discord cursor');
    const cursor = await openListenCursor(this.#o.cursorFile, shards, this.#o.shards ?? 1, owed, onError, takeoverReachMs);
    await this.#dmChannels.load(signal);
    const handover = new GatewayHandover(this.#resumeFrom);
    this.#resumeFrom = undefined;
    const client = new Client({
      intents: [GatewayIntentBits.Guilds, GatewayIntentBits.GuildMessages, GatewayIntentBits.MessageContent, GatewayIntentBits.DirectMessages],
      partials: [Partials.Channel],
      // Only what the adapter reads is cached; the rest is bounded or off (caches.ts).
      ...boundedCaches(),
      rest: { api: this.#o.restApi },
      ws: { buildStrategy: (manager) => handover.buildStrategy(manager, (m) => new SimpleShardingStrategy(m)) },
      // An unsharded bot keeps discord.js's defaults (shard 0 of 1), as before shards existed.
      ...((this.#o.shards ?? 1) > 1 ? { shards, shardCount: this.#o.shards } : {}),
    });
    this.#clients.add(client);
    // Ends the catch-ups with the run, however it ends.
    const run = new AbortController();
    linkAbort(signal, run);
    const catchUps = new Set<Promise<void>>();
    const toCatchUp = catchUpOnReady(client, shards, cursor, (shard, sinceMs, release) => {
      if (!this.#self && client.user) this.#self = { id: client.user.id, name: client.user.username };
      const p = this.#catchUp(client, { shard, sinceMs, release }, deliver, cursor!.cursor, run.signal).finally(() => catchUps.delete(p));
      catchUps.add(p);
    });
    let fail!: (err: Error) => void;
    const fatal = new Promise<never>((_, reject) => (fail = reject));
    fatal.catch(() => {});
    const stopped = untilAborted(signal);
    client.on('shardDisconnect', (ev) => fail(classifyClose(ev.code)));
    client.on('shardReconnecting', () => onReconnecting?.('Discord gateway connection lost; discord.js is reconnecting'));
    client.on('shardResume', (shardId) => {
      handover.onResumed(client, shardId);
      onConnected();
    });
    client.on('error', (err) => this.#o.log.warn({ err, channel: this.#o.id }, 'discord.js error'));
    client.on('messageCreate', (m) => {
      // discord.js knows the bot from READY on, which can be before login() resolves.
      if (!this.#self && client.user) this.#self = { id: client.user.id, name: client.user.username };
      this.#take(client, m, deliver, cursor?.cursor).catch((err: unknown) => this.#o.log.warn({ err, channel: this.#o.id }, 'Discord message not stored'));
    });
    client.on('interactionCreate', (i) => {
      if (!i.isButton()) return forgetDmChannel(client, i.channelId, i.guildId);
      // A button click (INTERACTION_CREATE, component type 2) is the clicker's message:
      // acknowledged at once, then stored (clicks.ts says why in that order).
      const click = normalizeButton(i, this.#o.id);
      forgetDmChannel(client, i.channelId, i.guildId);
      takeClick(i, click, deliver, { rest: this.#rest, call: this.#call, log: this.#o.log, channel: this.#o.id, signal });
    });
    try {
      await Promise.race([client.login(this.#token).catch((err: unknown) => Promise.reject(classifyDiscordError(err, 'login'))), fatal, stopped]);
      if (signal.aborted) return;
      // A resumed session has no READY of its own: the handed-over one may still be on its way.
      if (client.user) this.#self = { id: client.user.id, name: client.user.username };
      client.on('shardReady', () => onConnected());
      onConnected();
      await Promise.race([fatal, stopped]);
    } finally {
      client.removeAllListeners();
      toCatchUp();
      run.abort(signal.reason);
      unlinkAbort(signal, run);
      await Promise.allSettled(catchUps);
      cursor?.cursor.close();
      await cursor?.cursor.flushed();
      await this.#dmChannels.flushed();
      // Stopped for an upgrade: the session is handed on instead of ended.
      if ((signal.reason as { code?: string } | undefined)?.code === 'UPGRADE_HANDED_OVER')
        this.#handingOver = await handover.capture(client).then(
          (h) => (h && cursor && !cursor.cursor.settled ? { ...h, catchUpOwed: true } : h),
          (err: unknown) =>
            void this.#o.log.warn({ err, channel: this.#o.id }, 'the Discord session could not be handed over; the new process identifies anew'),
        );
      this.#clients.delete(client);
      await client.destroy();
    }
  }

  /**
   * One message, live or caught up, the same way: normalised (bots, other guilds and the
   * rest sorted as always), its DM channel dropped from discord.js's cache and remembered for
   * a catch-up, delivered; the cursor moves past it once it is stored.
   */
  async #take(client: Client, m: Message, deliver: Deliver, cursor: ListenCursor | undefined): Promise<void> {
    const msg = this.#self ? normalizeMessage(m, this.#o.id, this.#self.id, this.#o.guilds) : undefined;
    forgetDmChannel(client, m.channelId, m.guildId);
    if (!msg) return;
    if (!m.guildId) this.#dmChannels.seen(m.channelId);
    await deliver(msg);
    cursor?.stored(m.createdTimestamp);
  }

  /** One shard's catch-up (catch-up.ts), through `#take`; then its hold on the cursor ends (it moves past, or stays if it failed). Never rejects. */
  async #catchUp(
    client: Client,
    { shard, sinceMs, release }: { shard: number; sinceMs: number; release: () => void },
    deliver: Deliver,
    cursor: ListenCursor,
    signal: AbortSignal,
  ): Promise<void> {
    const log = { channel: this.#o.id, shard };
    try {
      const got = await catchUp({
        client,
        shard,
        shardCount: this.#o.shards ?? 1,
        guilds: this.#o.guilds,
        dmChannels: this.#dmChannels.ids,
        sinceMs,
        reachMs: catchUpReachMs(CATCH_UP_MAX_AGE_MS, this.#o.duplicateWindowMs),
        startedMs: cursor.openedAtMs,
        read: (id, query, s) => this.#call('catch-up', s, (rs) => this.#rest.get(Routes.channelMessages(id), { query, signal: rs })),
        take: (m) => this.#take(client, m, deliver, undefined),
        log: this.#o.log,
        channel: this.#o.id,
        signal,
      });
      cursor.caughtUp(got.newestMs);
      if (got.delivered) this.#o.log.info({ ...log, messages: got.delivered }, 'Discord catch-up delivered messages posted while away');
    } catch (err) {
      cursor.failed();
      if (!signal.aborted) this.#o.log.warn({ ...log, err }, 'Discord catch-up incomplete: the cursor stays, so a restart reads the gap again');
    } finally {
      release();
    }
  }

  /** From the attachment's CDN URL (signed by Discord, so no token goes with it); size checked first. */
  async download(a: Attachment, o: { maxBytes: number; signal: AbortSignal }): Promise<Buffer> {
    const name = a.name ?? a.type;
    checkSize(name, a.size, o.maxBytes);
    if (!a.url) throw new CodedError('ATTACHMENT_UNAVAILABLE', `Discord gave no URL for ${name}`);
    return fetchLimited(a.url, { maxBytes: o.maxBytes, signal: o.signal, name });
  }

  async send(target: ReplyTarget, text: string, options: TransportOptions): Promise<MessageRef> {
    const channel = target.threadId ?? target.chatId;
    // Discord keeps a nonce for a few minutes: the same reply sent again (a re-run after a
    // crash between Discord's answer and our commit of the id) returns the first message.
    const nonce = options.idempotencyKey ? nonceOf(options.idempotencyKey) : undefined;
    const body = {
      content: markdownForDiscord(text),
      allowed_mentions: NO_MENTIONS,
      ...(nonce ? { nonce, ...(this.#enforceNonce ? { enforce_nonce: true } : {}) } : {}),
      ...(target.chatType !== 'dm' && target.replyToMessageId ? { message_reference: { message_id: target.replyToMessageId, fail_if_not_exists: false } } : {}),
      ...(options.buttons?.length ? { components: buttonRow(options.buttons) } : {}),
    };
    const post = (b: object, signal: AbortSignal) => this.#rest.post(Routes.channelMessages(channel), { body: b, signal }) as Promise<SentMessage>;
    const sent = await this.#call('send', options.signal, (signal) =>
      nonce && this.#enforceNonce ? this.#enforcedOr(body, signal, post) : post(body, signal),
    );
    const ref = { chatId: target.chatId, messageId: sent.id, ...(target.threadId ? { threadId: target.threadId } : {}) };
    // A repeated nonce returns the message first sent with it, as it was: a draft that failed
    // with a 5xx after Discord stored it, retried with the reply's later text. Brought to this
    // text, or the reply would count on text its user never sees (whitespace aside: Discord trims).
    if (nonce && typeof sent.content === 'string' && sent.content.trim() !== body.content.trim())
      await this.edit(ref, text, { signal: options.signal, buttons: options.buttons ?? [] });
    return ref;
  }

  /** A message with the file attached (a multipart post); Discord shows an audio file with a player. */
  async sendFile(target: ReplyTarget, file: OutgoingFile, options: TransportOptions): Promise<MessageRef> {
    const channel = target.threadId ?? target.chatId;
    const sent = await this.#call(
      'send',
      options.signal,
      (signal) =>
        this.#rest.post(Routes.channelMessages(channel), {
          body: { allowed_mentions: NO_MENTIONS, attachments: [{ id: 0, filename: file.name }] },
          files: [{ name: file.name, data: file.bytes, contentType: file.mime }],
          signal,
        }) as Promise<{ id: string }>,
    );
    return { chatId: target.chatId, messageId: sent.id, ...(target.threadId ? { threadId: target.threadId } : {}) };
  }

  /**
   * Posts with `enforce_nonce`. A server that refuses the field (a 400, which created
   * nothing) gets the message again without it (the nonce stays), and the field is off for
   * this channel from then on; logged once. A 5xx (after discord.js's own retries, which keep
   * the field) is thrown as it is: the message may exist (an edge's 504 while Discord stored
   * it), and the reply's retry sends the same nonce with the field, so Discord answers with
   * that message instead of posting it twice. Only ENFORCE_NONCE_STRIKES such sends in a row
   * (each 4 tries) try it without the field, and turn it off if that works: a server that
   * fails every post carrying it, which would otherwise never answer again.
   */
  async #enforcedOr(body: object, signal: AbortSignal, post: (b: object, s: AbortSignal) => Promise<SentMessage>): Promise<SentMessage> {
    try {
      const sent = await post(body, signal);
      this.#enforceNonceStrikes = 0;
      return sent;
    } catch (err) {
      if (signal.aborted) throw err;
      if (!isEnforceNonceRefused(err) && !(isServerFailure(err) && ++this.#enforceNonceStrikes >= ENFORCE_NONCE_STRIKES)) throw err;
      const { enforce_nonce: _, ...without } = body as { enforce_nonce?: boolean };
      const sent = await post(without, signal);
      if (this.#enforceNonce) {
        this.#enforceNonce = false;
        this.#o.log.warn(
          { channel: this.#o.id, err: errorMessage(classifyDiscordError(err, 'send')) },
          'this Discord API does not take enforce_nonce; sending without it from now on',
        );
      }
      return sent;
    }
  }

  async edit(ref: MessageRef, text: string, options: TransportOptions): Promise<void> {
    const body = {
      content: markdownForDiscord(text),
      allowed_mentions: NO_MENTIONS,
      ...(options.buttons ? { components: options.buttons.length ? buttonRow(options.buttons) : [] } : {}),
    };
    await this.#call('edit', options.signal, (signal) => this.#rest.patch(Routes.channelMessage(ref.threadId ?? ref.chatId, ref.messageId), { body, signal }));
  }

  async delete(ref: MessageRef, options: TransportOptions): Promise<void> {
    await this.#call('delete', options.signal, (signal) => this.#rest.delete(Routes.channelMessage(ref.threadId ?? ref.chatId, ref.messageId), { signal }));
  }

  /** PUT / DELETE the bot's own reaction on a user's message (in its thread, if any). */
  async setReaction(ref: MessageRef, emoji: string, on: boolean, options: TransportOptions): Promise<void> {
    const route = Routes.channelMessageOwnReaction(ref.threadId ?? ref.chatId, ref.messageId, encodeURIComponent(emoji));
    await this.#call('reaction', options.signal, (signal) => (on ? this.#rest.put(route, { signal }) : this.#rest.delete(route, { signal })));
  }

  async typing(target: ReplyTarget, options: TransportOptions): Promise<void> {
    await this.#call('typing', options.signal, (signal) => this.#rest.post(Routes.channelTyping(target.threadId ?? target.chatId), { signal }));
  }
}
