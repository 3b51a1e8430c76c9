import type { Logger } from 'pino';
import { CodedError, errorMessage } from '../../src/contracts/errors.js';
import { sleep } from '../../src/util/abortable.js';
import { inviteOf } from './normalize.js';

/** How many handled invites are remembered, oldest forgotten first, so a federated invite spam cannot grow the memory without bound. */
export const INVITES_REMEMBERED = 1000;
/** Attempts at joining an invited room, the first included, before giving up on a transient failure. */
export const JOIN_ATTEMPTS = 5;
/** The wait before the second attempt; each later wait is three times the one before (5 s, 15 s, 45 s, 135 s: about 3.5 minutes in all). */
export const JOIN_FIRST_RETRY_MS = 5000;
const JOIN_RETRY_FACTOR = 3;
/** Joins retried at once: past it, a failed join is logged and its invite forgotten (an invite wave during an outage). */
export const MAX_RETRYING = 50;

export interface Invite {
  inviter: string;
  direct: boolean;
}

export interface InvitesOptions {
  /** The channel's id, for log lines. */
  id: string;
  userId: string;
  rooms: readonly string[];
  autoJoin: boolean;
  allowFrom: readonly string[];
  log: Logger;
  /** The wait before the second join attempt; short in tests. */
  joinRetryMs?: number;
  /** Joins the room (and, a direct chat, records it in m.direct); rejects with the classified error. */
  accept(roomId: string, invite: Invite, signal: AbortSignal): Promise<void>;
}

/** A failure worth another attempt: network, timeout, 5xx, 429. A refusal (403 M_FORBIDDEN, 404, a bad request, the token) is not. */
const transient = (err: unknown): boolean => err instanceof CodedError && err.retryable;

/**
 * The invites of /sync answers: accepted (joined) when auto_join is on, the inviter is allowed
 * and the room is wanted. A homeserver lists an invite in one incremental /sync only, so a join
 * that fails for a transient reason is tried again here, in the background (the sync loop goes
 * on), with backoff and 429's retry-after, until the listener stops.
 */
export class Invites {
  readonly #o: InvitesOptions;
  /** Invites acted on (joined, being joined or refused), oldest first, INVITES_REMEMBERED after each batch: a repeated batch repeats its invites. */
  readonly #seen = new Set<string>();
  /** Rooms whose join is being tried again: a repeat of their invite does not start a second try. */
  readonly #retrying = new Set<string>();
  /**
   * Ends the retries begun by one `listen`: the supervisor aborts a listener's signal only when
   * it stops it, not when the listener fails, and a retry must not join a room for a listener
   * that is gone (its channel removed, or reloaded with auto_join off, meanwhile).
   */
  #listening = new AbortController();

  constructor(o: InvitesOptions) {
    this.#o = o;
  }

  /** The listener ended (stopped or failed): its retries end with it; a next listen begins anew. */
  listenEnded(): void {
    this.#listening.abort();
    this.#listening = new AbortController();
  }

  /** One invited room of a /sync answer; `signal` is the listener's: its stop cancels a retry. */
  async handle(roomId: string, events: unknown[] | undefined, signal: AbortSignal): Promise<void> {
    if (this.#seen.has(roomId) || this.#retrying.has(roomId)) return;
    this.#seen.add(roomId);
    const invite = inviteOf(events, this.#o.userId);
    if (!invite) return;
    const allowed = this.#o.allowFrom.includes('*') || this.#o.allowFrom.includes(invite.inviter);
    const wanted = invite.direct || this.#o.rooms.includes(roomId);
    if (!this.#o.autoJoin || !allowed || !wanted) {
      this.#o.log.info(
        { channel: this.#o.id, room: roomId, inviter: invite.inviter, autoJoin: this.#o.autoJoin, allowed, wanted },
        'Matrix invite not accepted',
      );
      return;
    }
    try {
      await this.#accept(roomId, invite, 1, signal);
    } catch (err) {
      if (signal.aborted) throw err;
      if (this.#refused(roomId, err, 1)) return;
      if (this.#retrying.size >= MAX_RETRYING) {
        // An invite wave during an outage: a bounded number is retried, the rest forgotten (a new invite is acted on).
        this.#seen.delete(roomId);
        this.#o.log.warn({ channel: this.#o.id, room: roomId, retrying: MAX_RETRYING }, 'Matrix room could not be joined; too many joins retried already');
        return;
      }
      this.#retrying.add(roomId);
      void this.#retry(roomId, invite, err, AbortSignal.any([signal, this.#listening.signal]));
    }
  }

  /** After each batch: the oldest handled invites past INVITES_REMEMBERED are forgotten. */
  trim(): void {
    // Per batch, not per invite: a repeated batch larger than the bound then re-acts on the
    // invites that fell out only, not (FIFO churn) on all. One batch's invites are capped by the answer bound.
    for (const old of this.#seen) {
      if (this.#seen.size <= INVITES_REMEMBERED) break;
      this.#seen.delete(old);
    }
  }

  async #accept(roomId: string, invite: Invite, attempt: number, signal: AbortSignal): Promise<void> {
    await this.#o.accept(roomId, invite, signal);
    this.#o.log.info({ channel: this.#o.id, room: roomId, inviter: invite.inviter, direct: invite.direct, attempt }, 'Matrix invite accepted');
  }

  /**
   * A permanent refusal is logged and the invite forgotten (a new invite of the room is acted
   * on again); returns whether it was one.
   */
  #refused(roomId: string, err: unknown, attempt: number): boolean {
    if (transient(err)) return false;
    this.#seen.delete(roomId);
    this.#o.log.warn(
      { channel: this.#o.id, room: roomId, attempt, err: errorMessage(err) },
      'Matrix room could not be joined: the homeserver refused it; not tried again',
    );
    return true;
  }

  /** Attempts 2..JOIN_ATTEMPTS, in the background; never rejects (each outcome is logged). */
  async #retry(roomId: string, invite: Invite, first: unknown, signal: AbortSignal): Promise<void> {
    let err = first;
    let waitMs = this.#o.joinRetryMs ?? JOIN_FIRST_RETRY_MS;
    try {
      for (let attempt = 2; attempt <= JOIN_ATTEMPTS; attempt++, waitMs *= JOIN_RETRY_FACTOR) {
        // A 429 names its own wait; a shorter backoff would only be refused again.
        const retryInMs = Math.max(waitMs, err instanceof CodedError ? (err.retryAfterMs ?? 0) : 0);
        this.#o.log.warn(
          { channel: this.#o.id, room: roomId, attempt: attempt - 1, attempts: JOIN_ATTEMPTS, retryInMs, err: errorMessage(err) },
          'Matrix room could not be joined; trying again',
        );
        await sleep(retryInMs, signal);
        if (signal.aborted) break;
        try {
          await this.#accept(roomId, invite, attempt, signal);
          return;
        } catch (next) {
          if (signal.aborted) break;
          if (this.#refused(roomId, next, attempt)) return;
          err = next;
        }
      }
      // Forgotten, so that a repeated batch or a new invite of the room is acted on again.
      this.#seen.delete(roomId);
      if (signal.aborted) this.#o.log.info({ channel: this.#o.id, room: roomId }, 'Matrix join retry cancelled: the listener stopped');
      else
        this.#o.log.warn(
          { channel: this.#o.id, room: roomId, attempts: JOIN_ATTEMPTS, err: errorMessage(err) },
          'Matrix room could not be joined; giving up (invite the bot again to retry)',
        );
    } finally {
      this.#retrying.delete(roomId);
    }
  }
}
