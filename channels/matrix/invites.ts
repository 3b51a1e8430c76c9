import type { Logger } from 'pino';
import { CodedError, errorMessage } from '../../src/contracts/errors.js';
import { sleep } from '../../src/util/abortable.js';
import { inviteOf, type SyncResponse } from './normalize.js';

/** How many handled invites are remembered, oldest forgotten first, so a federated invite spam cannot grow the memory without bound. */
export const INVITES_REMEMBERED = 1000;
/** Attempts at joining an invited room, the first included, before giving up on a transient failure. */
export const JOIN_ATTEMPTS = 5;
/** The wait before the second attempt; each later wait is three times the one before (5 s, 15 s, 45 s, 135 s: about 3.5 minutes in all). */
export const JOIN_FIRST_RETRY_MS = 5000;
const JOIN_RETRY_FACTOR = 3;
/** Joins retried at once (and so stored as owed): past it, a failed join is logged and its invite forgotten (an invite wave during an outage). */
export const MAX_RETRYING = 50;

export interface Invite {
  inviter: string;
  direct: boolean;
}

/** A join still owed, stored with the sync position (sync-state.ts): /sync lists an invite once, so a restart must not forget it. */
export interface PendingJoin extends Invite {
  roomId: string;
  /** Attempts made (or begun) so far, 1 to JOIN_ATTEMPTS: one read back at JOIN_ATTEMPTS has none left. */
  attempts: number;
  /**
   * When the next attempt is due (wall clock): a listener started again, or the next start, waits
   * out the rest of the backoff, so listener restarts do not spend the attempts meant to outlast an
   * outage. Absent (stored by an older version): due at once.
   */
  nextAttemptAtMs?: number;
}

/** How a retry begins: after a failure (its backoff), after what is left of a resumed join's backoff, or with a resumed attempt already counted and stored. */
type RetryFrom = { err: unknown } | { waitMs: number } | { counted: true };

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
 * on), with backoff and 429's retry-after, until the listener ends; the joins still owed are
 * stored with the position and taken up again by the next listener (`resume`), also after a restart.
 */
export class Invites {
  readonly #o: InvitesOptions;
  /** Invites acted on (joined, being joined or refused), oldest first, INVITES_REMEMBERED after each batch: a repeated batch repeats its invites. */
  readonly #seen = new Set<string>();
  /** This listener's joins being tried again, which are the joins owed: a repeat of their invite does not start a second try. */
  #retrying = new Map<string, PendingJoin>();
  /** Stores the joins owed at once (a background retry's progress); unset before a listener's state is stored. */
  #save: (() => void) | undefined;
  /**
   * Ends the retries begun by one `listen`: the supervisor aborts a listener's signal only when
   * it stops it, not when the listener fails, and a retry must not join a room for a listener
   * that is gone (its channel removed, or reloaded with auto_join off, meanwhile).
   */
  #listening = new AbortController();

  constructor(o: InvitesOptions) {
    this.#o = o;
  }

  /** The joins owed now, for the stored state. */
  pending(): PendingJoin[] {
    return [...this.#retrying.values()].map((join) => ({ ...join }));
  }

  /**
   * The listener's state is stored: the joins it owed when stored last are tried again (if the
   * configuration still wants them and attempts are left), each once the rest of its backoff has
   * passed, and from now on `save` stores each retry's progress.
   */
  resume(joins: readonly PendingJoin[], save: () => void, signal: AbortSignal): void {
    this.#save = save;
    const now = Date.now();
    // A due time further away than the longest backoff (the clock was set back) is not waited for.
    const longestMs = this.#backoffMs(JOIN_ATTEMPTS - 1);
    const begun: Array<{ join: PendingJoin; from: RetryFrom }> = [];
    for (const stored of joins) {
      if (this.#retrying.has(stored.roomId)) continue;
      // Its last attempt was being made when the state was stored: the budget is spent.
      if (stored.attempts >= JOIN_ATTEMPTS) {
        this.#gaveUp(stored, undefined);
        continue;
      }
      this.#seen.add(stored.roomId);
      if (!this.#wanted(stored.roomId, stored)) continue;
      const join = { ...stored };
      if (!this.#admit(join)) continue;
      const waitMs = Math.min(Math.max(0, (join.nextAttemptAtMs ?? now) - now), longestMs);
      this.#o.log.info(
        { channel: this.#o.id, room: join.roomId, attempts: join.attempts, retryInMs: waitMs },
        'Matrix join still owed from before; trying again',
      );
      // One due now is counted here, so that the one write below holds each attempt about to be made.
      if (waitMs === 0) this.#count(join);
      begun.push({ join, from: waitMs === 0 ? { counted: true } : { waitMs } });
    }
    // One write, before any attempt, holding every join taken up: a crash now forgets none of them.
    if (joins.length) this.#store(this.#retrying);
    for (const { join, from } of begun) void this.#retry(join, from, AbortSignal.any([signal, this.#listening.signal]));
  }

  /** The listener ended (stopped or failed): its retries end with it, still owed in the stored state; a next listen begins anew. */
  listenEnded(): void {
    this.#listening.abort();
    this.#listening = new AbortController();
    this.#retrying = new Map();
    this.#save = undefined;
  }

  /** The invites of one /sync answer; `signal` is the listener's: its stop cancels a retry. */
  async batch(rooms: SyncResponse['rooms'], signal: AbortSignal): Promise<void> {
    for (const [roomId, room] of Object.entries(rooms?.invite ?? {})) await this.handle(roomId, room.invite_state?.events, signal);
    this.trim();
  }

  /** One invited room of a /sync answer; `signal` is the listener's: its stop cancels a retry. */
  async handle(roomId: string, events: unknown[] | undefined, signal: AbortSignal): Promise<void> {
    if (this.#seen.has(roomId) || this.#retrying.has(roomId)) return;
    this.#seen.add(roomId);
    const invite = inviteOf(events, this.#o.userId);
    if (!invite || !this.#wanted(roomId, invite)) return;
    try {
      await this.#accept(roomId, invite, 1, signal);
    } catch (err) {
      if (signal.aborted) throw err;
      if (this.#refused(roomId, err, 1)) return;
      const join = { roomId, inviter: invite.inviter, direct: invite.direct, attempts: 1 };
      if (this.#admit(join)) void this.#retry(join, { err }, AbortSignal.any([signal, this.#listening.signal]));
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

  /** Whether auto_join takes the invite: on, the inviter allowed, the room wanted (asked again on resume: the configuration may have changed). */
  #wanted(roomId: string, invite: Invite): boolean {
    const allowed = this.#o.allowFrom.includes('*') || this.#o.allowFrom.includes(invite.inviter);
    const wanted = invite.direct || this.#o.rooms.includes(roomId);
    if (this.#o.autoJoin && allowed && wanted) return true;
    this.#o.log.info({ channel: this.#o.id, room: roomId, inviter: invite.inviter, autoJoin: this.#o.autoJoin, allowed, wanted }, 'Matrix invite not accepted');
    return false;
  }

  /** A join owed, to be tried again in the background: taken on (true) if fewer than MAX_RETRYING are. */
  #admit(join: PendingJoin): boolean {
    if (this.#retrying.size >= MAX_RETRYING) {
      // An invite wave during an outage: a bounded number is retried, the rest forgotten (a new invite is acted on).
      this.#seen.delete(join.roomId);
      this.#o.log.warn({ channel: this.#o.id, room: join.roomId, retrying: MAX_RETRYING }, 'Matrix room could not be joined; too many joins retried already');
      return false;
    }
    this.#retrying.set(join.roomId, join);
    return true;
  }

  /** The wait after attempt `attempt` failed (without a 429's own). */
  #backoffMs(attempt: number): number {
    return (this.#o.joinRetryMs ?? JOIN_FIRST_RETRY_MS) * JOIN_RETRY_FACTOR ** (attempt - 1);
  }

  /**
   * The next attempt counted, before it is made, with the earliest the one after it is due should
   * it fail: stored, a restart in the middle of it neither makes the budget endless nor skips the backoff.
   */
  #count(join: PendingJoin): void {
    join.attempts++;
    join.nextAttemptAtMs = Date.now() + this.#backoffMs(join.attempts);
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

  /** Stores the joins owed now, if `retrying` is still this listener's (a retry of an ended one stores nothing). */
  #store(retrying: Map<string, PendingJoin>): void {
    if (retrying !== this.#retrying || !this.#save) return;
    try {
      this.#save();
    } catch (err) {
      // The stored list is then older: at worst a join is tried once more, or one fewer time, after a restart.
      this.#o.log.warn({ channel: this.#o.id, err: errorMessage(err) }, 'Matrix joins still owed could not be stored');
    }
  }

  /** Attempts after `join.attempts`, in the background, beginning as `from` says; never rejects (each outcome is logged). */
  async #retry(join: PendingJoin, from: RetryFrom, signal: AbortSignal): Promise<void> {
    const retrying = this.#retrying;
    let failed = 'err' in from ? from : undefined;
    let waitMs = 'waitMs' in from ? from.waitMs : 0;
    let counted = 'counted' in from;
    while (counted || join.attempts < JOIN_ATTEMPTS) {
      if (!counted) {
        if (failed) {
          const { err } = failed;
          // A 429 names its own wait; a shorter backoff would only be refused again.
          waitMs = Math.max(this.#backoffMs(join.attempts), err instanceof CodedError ? (err.retryAfterMs ?? 0) : 0);
          // Stored now: in an outage no batch is stored, and a listener that fails and is started again
          // must wait out the rest of this wait (a 429's included), not the earlier due time, long past.
          join.nextAttemptAtMs = Date.now() + waitMs;
          this.#store(retrying);
          this.#o.log.warn(
            { channel: this.#o.id, room: join.roomId, attempt: join.attempts, attempts: JOIN_ATTEMPTS, retryInMs: waitMs, err: errorMessage(err) },
            'Matrix room could not be joined; trying again',
          );
        }
        await sleep(waitMs, signal);
        if (signal.aborted) break;
        this.#count(join);
        this.#store(retrying);
      }
      counted = false;
      try {
        await this.#accept(join.roomId, join, join.attempts, signal);
        return this.#settled(join, retrying);
      } catch (next) {
        if (signal.aborted) break;
        if (this.#refused(join.roomId, next, join.attempts)) return this.#settled(join, retrying);
        failed = { err: next };
      }
    }
    if (signal.aborted) {
      // Still owed in the stored state: the next listener tries it again. Forgotten here, so that a repeated batch acts on it if it is not.
      if (!this.#retrying.has(join.roomId)) this.#seen.delete(join.roomId);
      this.#o.log.info({ channel: this.#o.id, room: join.roomId }, 'Matrix join retry cancelled: the listener stopped');
      return;
    }
    this.#gaveUp(join, failed);
    this.#settled(join, retrying);
  }

  /** Out of attempts: logged, and forgotten, so that a repeated batch or a new invite of the room is acted on again. */
  #gaveUp(join: PendingJoin, failed: { err: unknown } | undefined): void {
    this.#seen.delete(join.roomId);
    this.#o.log.warn(
      { channel: this.#o.id, room: join.roomId, attempts: join.attempts, ...(failed ? { err: errorMessage(failed.err) } : {}) },
      'Matrix room could not be joined; giving up (invite the bot again to retry)',
    );
  }

  /** A retry that ended for good (joined, refused, out of attempts): no longer owed, and stored so. */
  #settled(join: PendingJoin, retrying: Map<string, PendingJoin>): void {
    if (retrying.get(join.roomId) === join) retrying.delete(join.roomId);
    this.#store(retrying);
  }
}
