import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { ChannelAdapter, ChannelCapabilities, Deliver, SentAt, TransportOptions } from '../../src/contracts/channel.js';
import type { ChannelError } from '../../src/contracts/errors.js';
import type { Attachment, MessageRef, ReplyTarget } from '../../src/contracts/message.js';
import { sleep } from '../../src/util/abortable.js';
import { checkSize, fetchLimited } from '../../src/util/download.js';
import { platformCaller } from '../../src/util/platform-call.js';
import { notingSent } from '../../src/util/dispatch-answer.js';
import { catchUpChannel, type MmPostList } from './catch-up.js';
import { type MmListedChannel, readChannelList } from './channel-list.js';
import { CursorFile, catchUpReachMs } from '../../src/util/cursor-file.js';
import { classifyMattermostError, MattermostAnswerTooDeep, MattermostAnswerTooLarge, type MattermostApiError } from './errors.js';
import { neutralizeMattermostMentions } from './mentions.js';
import { normalizePost, readPosted, skipReason, type MmPost, type MmPostedData, type MmScope, type MmWhere } from './normalize.js';
import { mattermostRequest } from './rest.js';
import { runSocket } from './socket.js';

export interface MattermostOptions {
  id: string;
  url: string;
  token: string;
  teams: readonly string[];
  channels: readonly string[];
  log: Logger;
  /** Where the cursor is kept across restarts (under the state dir). */
  cursorFile: string;
  /** The inbox's duplicate window (ChannelContext.duplicateWindowMs): a catch-up reads nothing older. */
  duplicateWindowMs?: () => number;
  /** ChannelContext.listenerMoves: with no cursor of its own, a run catches up on that window. */
  listenerMoves?: boolean;
  /** Reconnect backoff: the first wait, doubled up to the max; short in tests. */
  reconnectBaseMs?: number;
  reconnectMaxMs?: number;
  pingIntervalMs?: number;
  connectTimeoutMs?: number;
  /** The WebSocket events (and bytes) that may wait behind a delivery (socket.ts's MAX_WAITING_*); small in tests. */
  maxWaitingEvents?: number;
  maxWaitingBytes?: number;
}

/** Mattermost's post size limit (since 5.0; older servers took 4,000). */
const MAX_POST_CHARS = 16_383;
/** After a long time down, a restart catches up on this much at most: older posts are history, not questions. */
const MAX_CATCH_UP_MS = 24 * 60 * 60 * 1000;
/** How long reading the bot's channel list may take: it streams, up to channel-list.ts's MAX_LIST_BYTES. */
const LIST_TIMEOUT_MS = 120_000;
/** An archived channel's posts, refused while the server's TeamSettings.ExperimentalViewArchivedChannels is off. */
const ARCHIVED_REFUSED = 'api.user.view_archived_channels.get_posts_for_channel.app_error';

/**
 * Mattermost over raw HTTP and `ws`: the WebSocket API in (authentication challenge, `posted`
 * events, reconnect with seq checks and a REST catch-up), REST posts out with drafts edited
 * in place. @mattermost/client is the web app's client (browser WebSocket, cookies and CSRF,
 * no AbortSignal on calls), more than the eight calls used here.
 */
export class MattermostAdapter implements ChannelAdapter {
  readonly capabilities: ChannelCapabilities = {
    maxMessageLength: MAX_POST_CHARS,
    editsDrafts: true,
    // Every edit re-renders the post for everyone in the channel: about one a second.
    minEditIntervalMs: 1000,
    nativeStream: false,
    typing: true,
    typingRefreshMs: 4000, // clients show "typing" for about 5 s
  };
  readonly #o: MattermostOptions;
  readonly #call = platformCaller(classifyMattermostError);
  readonly #listCall = platformCaller(classifyMattermostError, LIST_TIMEOUT_MS);
  /** The server has no `GET /users/me/channels` (before 6.1): the channels are listed a team at a time. */
  #listPerTeam = false;
  #botId: string | undefined;
  #botName: string | undefined;
  /** Server time (ms) up to which posts are stored; the catch-up after a reconnect starts here. */
  #cursor: number | undefined;
  /** A catch-up was skipped (the channel list over a bound): the cursor stays where it began until one is done. */
  #cursorHeld = false;
  /**
   * The server's time in the last answer that had a Date header, and this machine's monotonic
   * time then: the server's time now, whatever this machine's clock says (or a proxy strips).
   */
  #serverClock: { serverMs: number; monotonicMs: number } | undefined;
  /** Told already that no answer had a Date header (#localNowMs). */
  #saidNoServerClock = false;
  readonly #cursorFile: CursorFile;
  #typingOverSocket = false;
  #socket: { send(action: string, data: unknown): void } | undefined;

  constructor(options: MattermostOptions) {
    this.#o = options;
    this.#cursorFile = new CursorFile(options.cursorFile);
  }

  get id(): string {
    return this.#o.id;
  }
  get selfId(): string | undefined {
    return this.#botId;
  }
  get selfName(): string | undefined {
    return this.#botName;
  }

  /** One REST call; `sentAt`, when given, notes when its request went out (a reply's sends and edits). */
  async #api<T>(what: string, method: 'GET' | 'POST' | 'PUT' | 'DELETE', path: string, body: unknown, signal: AbortSignal, sentAt?: SentAt) {
    const answer = await this.#call(
      what,
      signal,
      notingSent(sentAt, (s) => mattermostRequest<T>({ url: this.#o.url, token: this.#o.token }, method, path, body, s)),
    );
    this.#noteServerTime(answer.serverTimeMs);
    return answer;
  }

  #noteServerTime(serverMs: number | undefined): void {
    if (serverMs !== undefined) this.#serverClock = { serverMs, monotonicMs: performance.now() };
  }

  /** The server's time now, from the last Date it sent (whole seconds, so a little behind: never ahead); undefined before one came. */
  #serverNowMs(): number | undefined {
    const c = this.#serverClock;
    return c && c.serverMs + (performance.now() - c.monotonicMs);
  }

  /** This machine's clock, for the server's when no answer ever had a Date header; said once. */
  #localNowMs(): number {
    if (!this.#saidNoServerClock) {
      this.#saidNoServerClock = true;
      this.#o.log.warn(
        { channel: this.#o.id },
        "no Mattermost answer had a Date header: the server's clock is unknown, so the catch-up floor and a first start's cursor use this machine's",
      );
    }
    return Date.now();
  }

  async listen(deliver: Deliver, signal: AbortSignal, onConnected: () => void, onReconnecting?: (reason: string) => void): Promise<void> {
    const me = await this.#api<{ id: string; username: string }>('users/me', 'GET', 'users/me', undefined, signal);
    this.#botId = me.data.id;
    this.#botName = me.data.username;
    const teams = await this.#api<Array<{ id: string; name: string }>>('users/me/teams', 'GET', 'users/me/teams', undefined, signal);
    const scope: MmScope = {
      botId: me.data.id,
      botName: me.data.username,
      teams: new Set(this.#o.teams),
      channels: new Set(this.#o.channels),
      teamNames: new Map(teams.data.map((t) => [t.id, t.name])),
    };
    // The first start answers nothing from before it; a restart (of the daemon, or the listener
    // after a failure) catches up from where it stood, a day back at most. Both by the server's
    // clock from any answer with a Date (a proxy may strip some), before this machine's (if ahead, posts missed).
    const nowMs = me.serverTimeMs ?? teams.serverTimeMs ?? this.#serverNowMs() ?? this.#localNowMs();
    const floorMs = nowMs - catchUpReachMs(MAX_CATCH_UP_MS, this.#o.duplicateWindowMs);
    // A cursor this process holds (a catch-up owed since a list over its bound) is as bounded as a
    // stored one; none stored where another instance may have run the listener until just now: the floor.
    const from = this.#cursor ?? (await this.#cursorFile.read()) ?? (this.#o.listenerMoves ? floorMs : undefined);
    this.#cursor = from === undefined ? undefined : Math.max(from, floorMs);
    let catchUp = this.#cursor !== undefined;
    let firstCatchUp = catchUp;
    this.#cursor ??= nowMs;
    const take = async (post: MmPost, where: MmWhere, moveCursor = true) => {
      const skip = skipReason(post, where, scope);
      if (skip) this.#o.log.trace({ channel: this.#o.id, post: post.id, reason: skip }, 'Mattermost post skipped');
      else await deliver(normalizePost(post, where, this.#o.id, scope));
      // Moved only past what is stored: a post that could not be stored is caught up again.
      if (moveCursor) this.#advance(post.create_at);
    };
    const wsUrl = `${this.#o.url.replace(/^http/, 'ws')}/api/v4/websocket`;
    const baseMs = this.#o.reconnectBaseMs ?? 500;
    let waitMs = baseMs;
    let resume: { connectionId: string; sequence: number } | undefined;
    try {
      while (!signal.aborted) {
        const end = await runSocket({
          wsUrl,
          token: this.#o.token,
          signal,
          resume,
          connectTimeoutMs: this.#o.connectTimeoutMs ?? 15_000,
          pingIntervalMs: this.#o.pingIntervalMs ?? 30_000,
          maxWaitingEvents: this.#o.maxWaitingEvents,
          maxWaitingBytes: this.#o.maxWaitingBytes,
          onHello: (_id, resumed, socket) => {
            this.#socket = socket;
            waitMs = baseMs;
            onConnected();
            // What came while we were away: the server's replay covers a resumed connection,
            // REST covers the rest (the inbox drops what arrives both ways).
            if (catchUp) this.#o.log.info({ channel: this.#o.id, resumed }, 'Mattermost reconnected; catching up on posts missed meanwhile');
          },
          afterHello: async () => {
            if (!catchUp) return;
            // The run's first catch-up may follow another lease holder (cluster mode): it stays
            // inside the inbox's duplicate window; a reconnect's follows this run's own cursor.
            await this.#catchUp(take, signal, firstCatchUp ? catchUpReachMs(MAX_CATCH_UP_MS, this.#o.duplicateWindowMs) : MAX_CATCH_UP_MS);
            catchUp = firstCatchUp = false;
          },
          onEvent: async (ev) => {
            if (ev.event !== 'posted') return;
            const posted = readPosted(ev.data as MmPostedData | undefined);
            if (!posted) return this.#o.log.debug({ channel: this.#o.id }, 'unreadable Mattermost posted event dropped');
            await take(posted.post, posted.where);
          },
          // Told when the socket closes; the reconnect waits for the delivery in progress (storage down).
          onClose: (reason) => {
            this.#socket = undefined;
            onReconnecting?.(`Mattermost WebSocket: ${reason}; reconnecting`);
            this.#o.log.warn({ channel: this.#o.id, reason, retryInMs: waitMs }, 'Mattermost WebSocket lost; reconnecting');
          },
        });
        this.#socket = undefined;
        if (signal.aborted) break;
        // Resume a connection that merely dropped; after lost events start afresh, so a server
        // that numbers a resumed connection differently cannot hold us in a reconnect loop.
        resume = end.connectionId && !end.lostEvents ? { connectionId: end.connectionId, sequence: end.sequence } : undefined;
        catchUp = true;
        await sleep(waitMs, signal);
        waitMs = Math.min(waitMs * 2, this.#o.reconnectMaxMs ?? 30_000);
      }
    } finally {
      this.#socket = undefined;
      await this.#cursorFile.flushed();
    }
  }

  /** Moves the cursor to `createAt` if that is later, and stores it; not while a catch-up is owed. */
  #advance(createAt: number): void {
    if (createAt <= this.#cursor! || this.#cursorHeld) return;
    this.#cursor = createAt;
    this.#cursorFile.save(createAt, (err) => this.#o.log.warn({ err, channel: this.#o.id }, 'could not store the Mattermost cursor'));
  }

  /**
   * Posts created since the cursor, in every channel of the bot's teams (direct and group
   * messages included) that had a post since: REST, one channel at a time, a page at a time
   * (catch-up.ts: a page too large to read is asked for again smaller, a post too large alone
   * is skipped with a warning), oldest first, through `take`. A channel read later may hold
   * posts older than one delivered already, so the cursor moves only once all are: a catch-up
   * cut short starts from where it did (the inbox drops what it stored already). A channel
   * list over a bound (channel-list.ts) will be so again at once: rather than fail the listener
   * (and the live socket with it) over and over, that catch-up is skipped with an error, and
   * the cursor held where it began until a catch-up is done, so a restart still tries it.
   */
  async #catchUp(take: (post: MmPost, where: MmWhere, moveCursor: boolean) => Promise<void>, signal: AbortSignal, reachMs: number): Promise<void> {
    const held = this.#cursor!;
    const channels = new Map<string, MmListedChannel>();
    try {
      await this.#listChannels(
        (c) => {
          if ((c.last_post_at ?? Infinity) >= held) channels.set(c.id, c);
        },
        held,
        signal,
      );
    } catch (err) {
      const cause = (err as ChannelError).cause;
      if (!(cause instanceof MattermostAnswerTooLarge || cause instanceof MattermostAnswerTooDeep)) throw err;
      this.#cursorHeld = true;
      this.#o.log.error(
        { channel: this.#o.id, bound: cause.message, sinceMs: held },
        "the bot's Mattermost channel list is over a bound: posts sent while away are not caught up, and the cursor stays, until a catch-up can read it",
      );
      return;
    }
    this.#cursorHeld = false;
    // A cursor held since a list over its bound may be days old by now: a day back at most, as
    // after a restart, by the server's clock (the list's Date, else the last one any answer had).
    // None seen: no floor, rather than this machine's clock, which may be ahead and skip posts.
    const serverNowMs = this.#serverNowMs();
    const since = serverNowMs === undefined ? held : Math.max(held, serverNowMs - reachMs);
    let delivered = 0;
    let skipped = 0;
    let newest = since;
    const read = async (channelId: string, query: string, s: AbortSignal) =>
      (await this.#api<MmPostList>('posts', 'GET', `channels/${encodeURIComponent(channelId)}/posts?${query}`, undefined, s)).data;
    for (const c of channels.values()) {
      const where: MmWhere = { channelType: c.type, channelName: c.name, teamId: c.team_id || undefined, senderName: undefined, mentions: [] };
      const got = await catchUpChannel({ read, channelId: c.id, sinceMs: since, log: this.#o.log, channel: this.#o.id, signal }, async (post) => {
        // Checked as each goes: a long catch-up must not hand over a post the inbox no longer knows.
        if (post.create_at < (this.#serverNowMs() ?? Number.NEGATIVE_INFINITY) - reachMs) return void skipped++;
        await take(post, where, false);
        delivered++;
      }).catch((err: unknown) => {
        // Archived since the cursor, on a server that shows no archived channel's posts: none can be read while it does not.
        if (((err as ChannelError | undefined)?.cause as MattermostApiError | undefined)?.errorId !== ARCHIVED_REFUSED) throw err;
        this.#o.log.warn({ channel: this.#o.id, mattermostChannel: c.id }, 'Mattermost refuses the posts of this archived channel; its catch-up is skipped');
        return undefined;
      });
      if (!got) continue;
      skipped += got.skipped;
      // A channel's newest post skipped: its last_post_at is that post's time, and the cursor passes it.
      newest = Math.max(newest, got.newestMs, got.skippedNewest ? (c.last_post_at ?? 0) : 0);
    }
    this.#advance(newest);
    if (delivered || skipped) this.#o.log.info({ channel: this.#o.id, posts: delivered, skipped }, 'Mattermost catch-up delivered missed posts');
  }

  /**
   * Every channel the bot is in, through `keep`: `GET /users/me/channels` (6.1+: every team's
   * and the DMs, once), else each team's list (DMs in each). Neither is paged by the server,
   * so both are read as they stream (channel-list.ts). Channels archived since `sinceMs` too
   * (`last_delete_at`: not archived, or at or after it): posts made before they were are missed.
   * A list's Date is noted as the server's time when the list is read (later than it said, so
   * the estimate lags: a floor from it reads more, never less).
   */
  async #listChannels(keep: (channel: MmListedChannel) => void, sinceMs: number, signal: AbortSignal): Promise<void> {
    const query = `?include_deleted=true&last_delete_at=${sinceMs}`;
    const list = (path: string) =>
      this.#listCall('channels', signal, async (s) =>
        this.#noteServerTime(await readChannelList({ url: this.#o.url, token: this.#o.token }, `${path}${query}`, keep, s)),
      );
    if (!this.#listPerTeam) {
      try {
        return await list('users/me/channels');
      } catch (err) {
        const cause = (err as ChannelError).cause as MattermostApiError | undefined;
        const status = cause?.status;
        // Only the route's own HTTP status says it is missing; an AppError in a list answered 200 is its failure.
        if (cause?.inList || (status !== 404 && status !== 501)) throw err;
        this.#listPerTeam = true;
        this.#o.log.info({ channel: this.#o.id, status }, "this Mattermost server has no GET /users/me/channels; listing each team's channels instead");
      }
    }
    const teams = await this.#api<Array<{ id: string }>>('users/me/teams', 'GET', 'users/me/teams', undefined, signal);
    for (const team of teams.data) await list(`users/me/teams/${encodeURIComponent(team.id)}/channels`);
  }

  async send(target: ReplyTarget, text: string, options: TransportOptions): Promise<MessageRef> {
    const message = this.#withCommands(neutralizeMattermostMentions(text), options);
    // The server drops a second post with the same pending_post_id for a while: a retry after
    // a lost answer does not post twice.
    const pending = options.idempotencyKey
      ? { pending_post_id: `${this.#botId}:${createHash('sha256').update(options.idempotencyKey).digest('hex').slice(0, 24)}` }
      : {};
    const r = await this.#api<{ id: string }>(
      'create post',
      'POST',
      'posts',
      { channel_id: target.chatId, message, ...(target.threadId ? { root_id: target.threadId } : {}), ...pending },
      options.signal,
      options.sentAt,
    );
    return { chatId: target.chatId, messageId: r.data.id, ...(target.threadId ? { threadId: target.threadId } : {}) };
  }

  /**
   * Interactive message buttons need an action URL the Mattermost server can post clicks to,
   * which channeld does not ask for: an approval question names its commands instead. Users
   * type them with a space first, or their client runs them as its own slash command.
   */
  #withCommands(message: string, options: TransportOptions): string {
    if (!options.buttons?.length) return message;
    const commands = options.buttons.map((b) => `\` ${b.data}\``).join(' or ');
    return `${message}\n\nReply ${commands} (with a space before the "/").`;
  }

  async edit(ref: MessageRef, text: string, options: TransportOptions): Promise<void> {
    await this.#api(
      'patch post',
      'PUT',
      `posts/${encodeURIComponent(ref.messageId)}/patch`,
      { message: this.#withCommands(neutralizeMattermostMentions(text), options) },
      options.signal,
      options.sentAt,
    );
  }

  async delete(ref: MessageRef, options: TransportOptions): Promise<void> {
    await this.#api('delete post', 'DELETE', `posts/${encodeURIComponent(ref.messageId)}`, undefined, options.signal);
  }

  /** POST /users/{id}/typing (5.26+); a server without it gets the WebSocket's user_typing action. */
  async typing(target: ReplyTarget, options: TransportOptions): Promise<void> {
    const data = { channel_id: target.chatId, ...(target.threadId ? { parent_id: target.threadId } : {}) };
    if (!this.#typingOverSocket) {
      try {
        await this.#api('typing', 'POST', `users/${encodeURIComponent(this.#botId ?? 'me')}/typing`, data, options.signal);
        return;
      } catch (err) {
        const status = ((err as ChannelError).cause as MattermostApiError | undefined)?.status;
        if (status !== 404 && status !== 501) throw err;
        this.#typingOverSocket = true;
        this.#o.log.info({ channel: this.#o.id }, 'this Mattermost server has no typing endpoint; sending typing over the WebSocket');
      }
    }
    this.#socket?.send('user_typing', data);
  }

  /** GET /api/v4/files/{id} with the bot's token; the size the post reported is checked first. */
  async download(a: Attachment, o: { maxBytes: number; signal: AbortSignal }): Promise<Buffer> {
    const name = a.name ?? a.type;
    checkSize(name, a.size, o.maxBytes);
    return fetchLimited(`${this.#o.url}/api/v4/files/${encodeURIComponent(a.id)}`, {
      maxBytes: o.maxBytes,
      signal: o.signal,
      name,
      headers: { authorization: `Bearer ${this.#o.token}`, 'x-requested-with': 'XMLHttpRequest' },
    });
  }
}
