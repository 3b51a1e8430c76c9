import { createHash, randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { ChannelAdapter, ChannelCapabilities, Deliver, SentAt, TransportOptions } from '../../src/contracts/channel.js';
import { ChannelError, CodedError, errorMessage } from '../../src/contracts/errors.js';
import type { Attachment, ChannelMessage, MessageRef, ReplyTarget } from '../../src/contracts/message.js';
import { sleep } from '../../src/util/abortable.js';
import { checkSize, fetchLimited } from '../../src/util/download.js';
import { platformCaller } from '../../src/util/platform-call.js';
import { notingSent } from '../../src/util/dispatch-answer.js';
import { classifyMatrixError, MatrixClient, type MatrixHttpError } from './client.js';
import { fitContent } from './fit.js';
import { markdownToMatrixHtml, neutraliseRoomMention } from './markdown.js';
import { CATCH_UP_MAX_AGE_MS, CATCH_UP_MAX_EVENTS_PER_ROOM, catchUpBudget, catchUpRoom, type MessagesAnswer } from './catch-up.js';
import { DirectChats } from './direct.js';
import { type Invite, Invites } from './invites.js';
import { isObject, normalizeEvent, type MatrixEvent, type SyncResponse } from './normalize.js';
import { gapMayBeNewer, logResumeFloor, type ResumeFloor, resumeFloor, takeoverFloor } from './resume-floor.js';
import { SyncCaller } from './sync-call.js';
import { SyncStateFile, type SyncState } from './sync-state.js';

export interface MatrixOptions {
  id: string;
  homeserverUrl: string;
  userId: string;
  rooms: readonly string[];
  autoJoin: boolean;
  allowFrom: readonly string[];
  stateDir: string;
  log: Logger;
  /** How long one /sync waits for news; short in tests. */
  syncTimeoutMs?: number;
  /** The wait before a failed join is tried again (then three times longer each time); short in tests. */
  joinRetryMs?: number;
  /** The inbox's duplicate window (ChannelContext.duplicateWindowMs): a resume from an older position skips what is older. */
  duplicateWindowMs?: () => number;
  /** ChannelContext.listenerMoves: with no stored position, the first /sync answers what is within that window. */
  listenerMoves?: boolean;
}

const API = '/_matrix/client/v3';
/** A Matrix event may hold 64 KiB; an edit carries the text twice, as Markdown and HTML (fit.ts keeps it inside). */
export const MAX_MESSAGE_CHARS = 8000;
/** How many of the bot's own event ids are kept to tell a reply to the bot. */
const SENT_REMEMBERED = 1000;
export { INVITES_REMEMBERED } from './invites.js';
const TYPING_TIMEOUT_MS = 15_000;

const ENCRYPTED_NOTICE =
  '🔒 This room is end-to-end encrypted, and this bot cannot read encrypted messages. Talk to it in a room without encryption (or a direct chat created with encryption turned off).';

const enc = encodeURIComponent;

/** Matrix by its client-server API: /sync in, m.room.message out, drafts as m.replace edits. */
export class MatrixAdapter implements ChannelAdapter {
  readonly capabilities: ChannelCapabilities = {
    maxMessageLength: MAX_MESSAGE_CHARS,
    editsDrafts: true,
    // Synapse's default message rate limit is low (about one event every few seconds after a burst of ten).
    minEditIntervalMs: 2000,
    nativeStream: false,
    typing: true,
    typingRefreshMs: TYPING_TIMEOUT_MS - 5000,
  };
  readonly #o: MatrixOptions;
  readonly #client: MatrixClient;
  readonly #call = platformCaller(classifyMatrixError);
  readonly #syncs: SyncCaller;
  readonly #state: SyncStateFile;
  #connected = false;
  #displayName: string | undefined;
  /** m.direct as the account stores it (user id → room ids), and its writer. */
  readonly #direct: DirectChats;
  readonly #sent = new Set<string>();
  /** The bot's reaction events by `<message event id>\n<emoji>`, to take them off again. */
  readonly #reactions = new Map<string, string>();
  readonly #invites: Invites;
  #authenticatedMedia = true;
  /** The listener's sync state as last stored. */
  #current: SyncState | undefined;

  constructor(options: MatrixOptions, token: string) {
    this.#o = options;
    this.#client = new MatrixClient(options.homeserverUrl, token);
    this.#state = new SyncStateFile(options.stateDir, options.id, () => this.#invites.pending());
    this.#syncs = new SyncCaller(this.#client, options);
    this.#invites = new Invites({ ...options, accept: (roomId, invite, signal) => this.#accept(roomId, invite, signal) });
    const direct = `${API}/user/${enc(options.userId)}/account_data/m.direct`;
    this.#direct = new DirectChats((body, signal) => this.#call('m.direct', signal, (s) => this.#client.request('PUT', direct, { body, signal: s })), {
      read: (signal) => this.#readDirect(signal),
      readFailed: (room, err) =>
        this.#o.log.warn(
          { channel: this.#o.id, room, err: errorMessage(err) },
          'Matrix m.direct could not be read before recording a direct chat; written from the copy known here',
        ),
    });
  }

  get id(): string {
    return this.#o.id;
  }
  get selfId(): string | undefined {
    return this.#connected ? this.#o.userId : undefined;
  }
  get selfName(): string | undefined {
    return this.#displayName;
  }

  #get<T>(what: string, path: string, signal: AbortSignal, query?: Record<string, string | undefined>): Promise<T> {
    return this.#call(what, signal, (s) => this.#client.request<T>('GET', path, { signal: s, ...(query ? { query } : {}) }));
  }

  listen(deliver: Deliver, signal: AbortSignal, onConnected: () => void): Promise<void> {
    // Join retries end with this listener, failed or stopped: the supervisor aborts `signal` only when it stops it.
    return this.#listen(deliver, signal, onConnected).finally(() => this.#invites.listenEnded());
  }

  async #listen(deliver: Deliver, signal: AbortSignal, onConnected: () => void): Promise<void> {
    const startedMs = Date.now();
    const me = await this.#get<{ user_id?: string }>('whoami', `${API}/account/whoami`, signal);
    if (me.user_id !== this.#o.userId)
      throw new ChannelError('CHANNEL_AUTH_FAILED', `Matrix: the access token belongs to ${me.user_id ?? 'nobody'}, not to user_id ${this.#o.userId}`);
    await this.#learnServer(signal);
    this.#connected = true;
    let state = this.#state.read(this.#o.userId);
    // Resumed from a stored position: its age decides whether the first batch is read whole (resume-floor.ts).
    let resumed = state !== undefined;
    if (!state) {
      // A fresh start: one sync without waiting, whose timeline is history and is not answered, but for
      // its recent messages where another instance may have run the listener until it was killed (a
      // catch-up, gaps and 429s, that must not run inside the connect timeout: connected first).
      const first = await this.#syncs.sync(undefined, 0, signal);
      onConnected();
      state = { userId: this.#o.userId, since: first.next_batch as string, encryptedNotified: [], savedAtMs: Date.now() };
      const floor = this.#o.listenerMoves ? takeoverFloor(this.#o.duplicateWindowMs, startedMs) : undefined;
      await this.#handleRooms(first, state, undefined, floor ? deliver : undefined, signal, floor);
      this.#state.write(state);
      this.#syncs.fullSize();
      if (floor) logResumeFloor(floor, this.#o.log, this.#o.id);
    }
    this.#current = state;
    this.#invites.resume(state.pendingJoins ?? [], () => this.#state.write(state), signal);
    if (resumed) onConnected();
    while (!signal.aborted) {
      let batch: SyncResponse;
      try {
        batch = await this.#syncs.sync(state.since, this.#o.syncTimeoutMs ?? 30_000, signal);
      } catch (err) {
        if (signal.aborted) break;
        if (err instanceof ChannelError && err.retryAfterMs !== undefined) {
          this.#o.log.warn({ channel: this.#o.id, retryAfterMs: err.retryAfterMs }, 'Matrix asked to slow down /sync');
          await sleep(err.retryAfterMs, signal).catch(() => {});
          continue;
        }
        throw err;
      }
      // Only the first batch: a later one's old timestamps are late events (federation), still to answer.
      const floor = resumed ? resumeFloor(state.savedAtMs, this.#o.duplicateWindowMs, startedMs) : undefined;
      await this.#handleRooms(batch, state, state.since, deliver, signal, floor);
      // Every message of the batch is in the inbox: only now does the position move past it (stamped
      // here, not by a write of the joins owed, which leaves the position where it was).
      state.since = batch.next_batch as string;
      state.savedAtMs = Date.now();
      this.#state.write(state);
      this.#syncs.fullSize();
      if (floor) logResumeFloor(floor, this.#o.log, this.#o.id);
      resumed = false;
    }
  }

  /** Whether the server serves authenticated media (v1.11); older servers get the legacy download path. */
  async #learnServer(signal: AbortSignal): Promise<void> {
    const versions = await this.#get<{ versions?: unknown }>('versions', '/_matrix/client/versions', signal).catch(() => ({ versions: undefined }));
    const list = Array.isArray(versions.versions) ? versions.versions.filter((v): v is string => typeof v === 'string') : [];
    this.#authenticatedMedia = list.some((v) => /^v1\.(\d+)$/.test(v) && Number(v.slice(3)) >= 11);
    this.#direct.set(await this.#readDirect(signal));
    const profile = await this.#get<{ displayname?: unknown }>('profile', `${API}/profile/${enc(this.#o.userId)}`, signal).catch(() => ({
      displayname: undefined,
    }));
    this.#displayName = typeof profile.displayname === 'string' && profile.displayname.trim() ? profile.displayname.trim() : undefined;
  }

  /** The account's m.direct as the server holds it now; an account without one has none (404 M_NOT_FOUND). */
  async #readDirect(signal: AbortSignal): Promise<unknown> {
    try {
      return await this.#get<unknown>('m.direct', `${API}/user/${enc(this.#o.userId)}/account_data/m.direct`, signal);
    } catch (err) {
      if (err instanceof ChannelError && (err.cause as MatrixHttpError | undefined)?.errcode === 'M_NOT_FOUND') return {};
      throw err;
    }
  }

  /** Account data, invites and timelines of one /sync answer, asked for from `since` (none: a first sync); `deliver` absent: history, not answered. */
  async #handleRooms(
    batch: SyncResponse,
    state: SyncState,
    since: string | undefined,
    deliver: Deliver | undefined,
    signal: AbortSignal,
    floor?: ResumeFloor,
  ): Promise<void> {
    for (const e of batch.account_data?.events ?? []) if (isObject(e) && e.type === 'm.direct') this.#direct.set(e.content);
    await this.#invites.batch(batch.rooms, signal);
    const messages: ChannelMessage[] = [];
    const catchUpLeft = catchUpBudget();
    for (const [roomId, room] of Object.entries(batch.rooms?.join ?? {})) {
      const dm = this.#direct.has(roomId) && !this.#o.rooms.includes(roomId);
      if (!dm && !this.#o.rooms.includes(roomId)) continue;
      const events = [...(room.state?.events ?? []), ...(room.timeline?.events ?? [])].filter(isObject) as MatrixEvent[];
      if (events.some((e) => e.type === 'm.room.encryption' || e.type === 'm.room.encrypted')) await this.#refuseEncrypted(roomId, state, signal);
      if (!deliver) continue;
      const view = { self: this.#o.userId, selfName: this.#displayName, roomId, dm, sentByBot: (id: string) => this.#sent.has(id) };
      // More events came in since the last batch than the filter's limit: the gap is read back first, oldest
      // first. A first sync's gap (a takeover's) only when the timeline does not reach back past the floor.
      const walk = room.timeline?.limited === true && (since !== undefined || (floor !== undefined && gapMayBeNewer(room.timeline.events, floor)));
      const gap = walk ? await this.#catchUp(roomId, room.timeline?.prev_batch, since, catchUpLeft, signal, floor) : [];
      for (const e of [...gap, ...(room.timeline?.events ?? [])]) {
        const msg = isObject(e) ? normalizeEvent(e, this.#o.id, view) : undefined;
        if (!msg) continue;
        // receivedAt is the event's origin_server_ts (now when it has none: kept, as the gap's walk keeps it).
        if (floor && msg.receivedAt < floor.beforeMs) floor.skipped++;
        else messages.push(msg);
      }
    }
    if (!deliver || !messages.length) return;
    // Handed over at once (the inbox stores a batch together); one failure keeps the position where it was.
    const delivered = await Promise.allSettled(messages.map((m) => deliver(m)));
    const failed = delivered.find((d) => d.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
  }

  /** The missed events of a limited timeline (catch-up.ts), at most CATCH_UP_MAX_EVENTS_PER_ROOM and what the batch has left; `since` is the position this batch was asked from. */
  async #catchUp(
    roomId: string,
    prevBatch: unknown,
    since: string | undefined,
    left: { events: number; bytes: number },
    signal: AbortSignal,
    floor: ResumeFloor | undefined,
  ): Promise<MatrixEvent[]> {
    if (typeof prevBatch !== 'string' || !prevBatch) {
      this.#o.log.warn({ channel: this.#o.id, room: roomId }, 'Matrix /sync left out older messages in a room and gave no prev_batch to read them');
      return [];
    }
    const path = `${API}/rooms/${enc(roomId)}/messages`;
    const { events, bound, bytes, notReadAtLeast } = await catchUpRoom({
      read: (query, s) => this.#get<MessagesAnswer>('messages', path, s, query),
      roomId,
      from: prevBatch,
      ...(since !== undefined ? { to: since } : {}),
      maxEvents: Math.min(CATCH_UP_MAX_EVENTS_PER_ROOM, left.events),
      maxBytes: left.bytes,
      notBeforeMs: Math.max(Date.now() - CATCH_UP_MAX_AGE_MS, floor?.beforeMs ?? Number.NEGATIVE_INFINITY),
      channel: this.#o.id,
      log: this.#o.log,
      signal,
    });
    left.events -= events.length;
    left.bytes -= bytes;
    if (floor && bound === 'age') floor.skipped += notReadAtLeast ?? 0;
    if (!bound) this.#o.log.info({ channel: this.#o.id, room: roomId, events: events.length }, 'Matrix read back the messages a limited /sync left out');
    return events;
  }

  /** An invite accepted: joined, and a direct chat recorded in m.direct. */
  async #accept(roomId: string, invite: Invite, signal: AbortSignal): Promise<void> {
    await this.#call('join', signal, (s) => this.#client.request('POST', `${API}/join/${enc(roomId)}`, { body: {}, signal: s }));
    // Recorded as the spec says clients do, so the room is still a direct chat after a restart.
    if (invite.direct) await this.#direct.add(invite.inviter, roomId, signal);
  }

  /** Once per room (remembered across restarts): say the bot cannot read it, rather than go silent. */
  async #refuseEncrypted(roomId: string, state: SyncState, signal: AbortSignal): Promise<void> {
    if (state.encryptedNotified.includes(roomId)) return;
    this.#o.log.warn({ channel: this.#o.id, room: roomId }, 'Matrix room is end-to-end encrypted; this channel cannot read it and told the room so');
    try {
      await this.#put(roomId, `cd.e2e.${roomId}`, { msgtype: 'm.notice', body: ENCRYPTED_NOTICE, 'm.mentions': {} }, signal);
      state.encryptedNotified.push(roomId);
    } catch (err) {
      if (signal.aborted) throw err;
      this.#o.log.warn(
        { channel: this.#o.id, room: roomId, err: errorMessage(err) },
        'the encrypted-room notice could not be sent; trying again on the next message',
      );
    }
  }

  /** /status: the encrypted rooms this channel refuses, so the operator sees them without reading logs. */
  notes(): string[] {
    return (this.#current?.encryptedNotified ?? []).map((room) => `room ${room} is end-to-end encrypted: not served (the room was told once)`);
  }

  /** PUT …/send with a transaction id: the homeserver answers a repeat with the first event, so a retry posts nothing new. */
  async #put(roomId: string, txnKey: string, content: Record<string, unknown>, signal: AbortSignal, type = 'm.room.message', sentAt?: SentAt): Promise<string> {
    const txnId = createHash('sha256').update(`${this.#o.id}\n${txnKey}`).digest('base64url').slice(0, 32);
    const sent = await this.#call(
      'send',
      signal,
      notingSent(sentAt, (s) =>
        this.#client.request<{ event_id?: unknown }>('PUT', `${API}/rooms/${enc(roomId)}/send/${type}/${txnId}`, { body: fitContent(content), signal: s }),
      ),
    );
    if (typeof sent.event_id !== 'string') throw new ChannelError('CHANNEL_REQUEST_FAILED', 'Matrix send: the answer has no event_id');
    this.#sent.add(sent.event_id);
    if (this.#sent.size > SENT_REMEMBERED) this.#sent.delete(this.#sent.values().next().value!);
    return sent.event_id;
  }

  /** Markdown as `body` (what plain clients show) and as HTML; no one is pinged. */
  #content(text: string): Record<string, unknown> {
    return {
      msgtype: 'm.text',
      body: neutraliseRoomMention(text),
      format: 'org.matrix.custom.html',
      formatted_body: markdownToMatrixHtml(text),
      'm.mentions': {},
    };
  }

  // Approval buttons: Matrix has none; the question already says "Reply /approve <id>".
  async send(target: ReplyTarget, text: string, options: TransportOptions): Promise<MessageRef> {
    const content = this.#content(text);
    const inReplyTo = target.chatType !== 'dm' && target.replyToMessageId ? { 'm.in_reply_to': { event_id: target.replyToMessageId } } : {};
    // In a thread: the thread relation, with the reply as its fallback for clients without threads.
    if (target.threadId) content['m.relates_to'] = { rel_type: 'm.thread', event_id: target.threadId, is_falling_back: false, ...inReplyTo };
    else if (target.chatType !== 'dm' && target.replyToMessageId) content['m.relates_to'] = inReplyTo;
    const eventId = await this.#put(target.chatId, options.idempotencyKey ?? randomUUID(), content, options.signal, undefined, options.sentAt);
    return { chatId: target.chatId, messageId: eventId, ...(target.threadId ? { threadId: target.threadId } : {}) };
  }

  /** An edit (m.replace): `m.new_content` is what clients show; the outer body is the fallback for those that do not know edits. */
  async edit(ref: MessageRef, text: string, options: TransportOptions): Promise<void> {
    const next = this.#content(text);
    await this.#put(
      ref.chatId,
      randomUUID(),
      {
        ...next,
        body: `* ${next.body as string}`,
        formatted_body: `* ${next.formatted_body as string}`,
        'm.new_content': next,
        'm.relates_to': { rel_type: 'm.replace', event_id: ref.messageId },
      },
      options.signal,
      undefined,
      options.sentAt,
    );
  }

  /** ack_reaction: an m.annotation on the user's message, taken off by redacting it; one whose event this run did not send (a restart in between) is left. */
  async setReaction(ref: MessageRef, emoji: string, on: boolean, options: TransportOptions): Promise<void> {
    const key = `${ref.messageId}\n${emoji}`;
    if (on) {
      const content = { 'm.relates_to': { rel_type: 'm.annotation', event_id: ref.messageId, key: emoji } };
      this.#reactions.set(key, await this.#put(ref.chatId, `react\n${key}`, content, options.signal, 'm.reaction'));
      if (this.#reactions.size > SENT_REMEMBERED) this.#reactions.delete(this.#reactions.keys().next().value!);
      return;
    }
    const eventId = this.#reactions.get(key);
    if (!eventId) return;
    await this.delete({ chatId: ref.chatId, messageId: eventId }, options);
    this.#reactions.delete(key);
  }

  async delete(ref: MessageRef, options: TransportOptions): Promise<void> {
    await this.#call('redact', options.signal, (s) =>
      this.#client.request('PUT', `${API}/rooms/${enc(ref.chatId)}/redact/${enc(ref.messageId)}/${randomUUID()}`, { body: {}, signal: s }),
    );
  }

  async typing(target: ReplyTarget, options: TransportOptions): Promise<void> {
    await this.#typing(target.chatId, true, options.signal);
  }

  /** The reply is complete: the typing notice goes at once rather than when it times out. */
  async finalize(refs: readonly MessageRef[], options: TransportOptions): Promise<void> {
    const rooms = new Set(refs.map((r) => r.chatId));
    for (const room of rooms) await this.#typing(room, false, options.signal).catch(() => {});
  }

  async #typing(roomId: string, on: boolean, signal: AbortSignal): Promise<void> {
    await this.#call('typing', signal, (s) =>
      this.#client.request('PUT', `${API}/rooms/${enc(roomId)}/typing/${enc(this.#o.userId)}`, {
        body: on ? { typing: true, timeout: TYPING_TIMEOUT_MS } : { typing: false },
        signal: s,
      }),
    );
  }

  /** An mxc:// file: authenticated media (v1.11) where the server has it, else the legacy media API. */
  async download(a: Attachment, o: { maxBytes: number; signal: AbortSignal }): Promise<Buffer> {
    const name = a.name ?? a.type;
    checkSize(name, a.size, o.maxBytes);
    const m = /^mxc:\/\/([^/]+)\/([^/?#]+)$/.exec(a.id);
    if (!m) throw new CodedError('ATTACHMENT_UNAVAILABLE', `${name}: not an mxc:// address`);
    const path = this.#authenticatedMedia
      ? `/_matrix/client/v1/media/download/${enc(m[1]!)}/${enc(m[2]!)}`
      : `/_matrix/media/v3/download/${enc(m[1]!)}/${enc(m[2]!)}`;
    return fetchLimited(this.#client.url(path), { maxBytes: o.maxBytes, signal: o.signal, name, headers: { authorization: `Bearer ${this.#client.token}` } });
  }
}
