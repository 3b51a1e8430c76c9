import { type Element, xml } from '@xmpp/client';
import type { Logger } from 'pino';
import { ChannelError, errorMessage } from '../../src/contracts/errors.js';
import { bareOf, NS_MUC_USER, resourceOf } from './normalize.js';

const NS_MUC = 'http://jabber.org/protocol/muc';
/** The wait before a room is joined again after its first removal or refusal; it doubles with each one after. */
export const REJOIN_BASE_DELAY_MS = 1000;
/** The longest wait between two attempts at one room. */
export const REJOIN_MAX_DELAY_MS = 5 * 60_000;
/** A join the room has not answered (joined or refused) in this time counts as failed, and is tried again. */
const JOIN_ANSWER_TIMEOUT_MS = 30_000;
/**
 * A room kept this long counts as joined for good: its next removal backs off from the first
 * delay again. Sooner, the backoff goes on where it was, so a room that removes the bot each
 * time it is back is joined less and less often, never in a loop.
 */
const REJOIN_STABLE_MS = 10 * 60_000;

/**
 * What the adapter keeps across runs of the listener, so that only a new adapter (channeld
 * restarted, or a reload that restarts the channel) forgets it. A listener that ends for a
 * reason the supervisor retries (a login refused for now, a lost connection) starts a new run:
 * forgetting these there would join a room the bot was put out of (and have its refusal, now
 * a first join's, stop the whole channel) or create a destroyed room anew.
 */
export interface RoomsMemory {
  /** Rooms left until the channel restarts → why. */
  readonly left: Map<string, string>;
  /** Rooms joined at least once: a refusal there is a rejoin's (the room changed), not a configuration to fix. */
  readonly joinedOnce: Set<string>;
}

/** For /status: the rooms left for good (also between two runs of the listener). */
export function leftNotes(memory: RoomsMemory): string[] {
  return [...memory.left].map(([room, why]) => `not in room ${room}: ${why}; not rejoined until the channel restarts`);
}

export interface RoomsOptions {
  channel: string;
  rooms: ReadonlyArray<{ jid: string; nick: string }>;
  log: Logger;
  /** The adapter's, across runs of the listener. */
  memory: RoomsMemory;
  /** Room occupant (room@service/nick) → real bare JID, where the room shows it; the adapter keeps it. */
  occupants: Map<string, string>;
  /** Sends on the current connection; rejects when there is none. */
  send(element: Element): Promise<void>;
  /** Whether the connection takes stanzas now (a new session past its setup, or a resumed one). */
  online(): boolean;
  /** Ends the listener with `err` (a kick, a ban, a room it may not join). */
  fail(err: ChannelError): void;
  /** The listener's: once aborted nothing is joined or scheduled any more. */
  signal: AbortSignal;
}

/** One room's attempts at joining in this run. */
interface Attempts {
  /** Failed attempts since it was last kept REJOIN_STABLE_MS (0: none, or only the first join). */
  count: number;
  /** The next attempt, or the wait for a join's answer. */
  timer: NodeJS.Timeout | undefined;
  joinedAt: number | undefined;
  /** Why it is not joined now, for /status. */
  why: string | undefined;
}

/** Why the room removed us, from the self-presence's status codes (XEP-0045 §15.6.2). */
const TRANSIENT: Record<string, string> = {
  '333': 'the room removed the bot because a stanza to it bounced (status 333)',
  '332': 'the room service is shutting down (status 332)',
};

/**
 * The rooms of one run of the listener (XEP-0045): joining them, who is who in them, and what
 * happens when the bot is removed or refused. Nothing here is silent: every removal is logged
 * with its room and reason. Kicks (307) and bans (301) end the listener, as before. A removal
 * the room may undo by itself (333, 332, or an unavailable self-presence with no status code:
 * the bot never leaves a room on its own while it runs) is followed by a rejoin with a doubling
 * backoff, as is a join refused with an error of type `wait` (RFC 6120 §8.3.2: retry after
 * waiting). A room the bot may no longer be in (321: its affiliation changed; 322: members
 * only) or that is gone (destroyed) is left, with an error logged and a note in /status, until
 * the channel restarts: joining it again would be refused (and a refusal would stop the whole
 * channel), or would create the destroyed room anew, with the bot as its owner, against what
 * its owner just did. A rejoin (of a room joined before, in this run or an earlier one) refused
 * with anything but `wait` (or with every alternate nick taken) leaves the room the same way:
 * the room was fine before, so DMs and the other rooms are not stopped for it, as a first
 * join's refusal stops them (a configuration to fix). What is left, and what was joined, is
 * kept by the adapter across runs of the listener (RoomsMemory).
 */
export class Rooms {
  /** Joined rooms: bare room JID → our nick there. */
  readonly joined = new Map<string, string>();
  readonly #o: RoomsOptions;
  /** A room whose nick was taken → the alternate asked for. */
  readonly #trying = new Map<string, string>();
  /** This run's only: a new run joins every room not left at once anyway, after the supervisor's own backoff. */
  readonly #attempts = new Map<string, Attempts>();
  readonly #left: Map<string, string>;
  readonly #onAbort = () => this.close();
  #closed = false;

  constructor(options: RoomsOptions) {
    this.#o = options;
    this.#left = options.memory.left;
    options.signal.addEventListener('abort', this.#onAbort, { once: true });
  }

  /** A new session (a session's rooms end with it): presence in every room not left. */
  async joinAll(): Promise<void> {
    this.joined.clear();
    this.#trying.clear();
    for (const room of this.#o.rooms) if (!this.#left.has(room.jid)) await this.#join(room.jid, room.nick);
  }

  /** No more joins; every timer cleared. The listener calls it as it ends, however it ends. */
  close(): void {
    this.#closed = true;
    this.#o.signal.removeEventListener('abort', this.#onAbort);
    for (const a of this.#attempts.values()) clearTimeout(a.timer);
    this.#attempts.clear();
  }

  /** For /status: the rooms the bot is out of, and why. */
  notes(): string[] {
    const out = leftNotes(this.#o.memory);
    for (const [room, a] of this.#attempts)
      if (a.count > 0 && !this.joined.has(room)) out.push(`not in room ${room} for now: ${a.why}; rejoining (attempt ${a.count + 1})`);
    return out;
  }

  /** Room presence: who is who (real JIDs), our own join, removals and refusals. */
  presence(st: Element): void {
    const from = st.attrs.from ?? '';
    const room = bareOf(from);
    const wanted = this.#o.rooms.find((r) => r.jid === room);
    if (!wanted || this.#left.has(room)) return;
    const nick = this.joined.get(room) ?? this.#trying.get(room) ?? wanted.nick;
    const user = st.getChild('x', NS_MUC_USER);
    const codes = new Set((user?.getChildren('status') ?? []).map((s) => s.attrs.code));
    if (st.attrs.type === 'error') {
      this.#refused(st, room, nick, wanted.nick);
      return;
    }
    const real = user?.getChild('item')?.attrs.jid;
    if (!(codes.has('110') || resourceOf(from) === nick)) {
      if (st.attrs.type === 'unavailable') this.#o.occupants.delete(from);
      else if (real) this.#o.occupants.set(from, bareOf(real));
      return;
    }
    // A nick change (ours, by the room): the presence under the new nick follows.
    if (st.attrs.type === 'unavailable' && codes.has('303')) return;
    if (st.attrs.type === 'unavailable') {
      this.#removed(st, room, codes, user);
      return;
    }
    // Also a change of our role or status in a room we are in: only a join is logged.
    const joining = !this.joined.has(room);
    this.joined.set(room, resourceOf(from));
    this.#trying.delete(room);
    if (!joining) return;
    this.#o.memory.joinedOnce.add(room);
    const a = this.#attempts.get(room);
    if (a) {
      clearTimeout(a.timer);
      a.timer = undefined;
      a.joinedAt = Date.now();
      a.why = undefined;
    }
    this.#o.log.info({ channel: this.#o.channel, room, nick: resourceOf(from) }, 'XMPP room joined');
  }

  /** Sends our presence to `room` under `nick` (no history: it was answered when it was new), and waits for its answer. */
  #join(room: string, nick: string): Promise<void> {
    if (this.#closed) return Promise.resolve();
    const a = this.#attemptsOf(room);
    clearTimeout(a.timer);
    a.timer = setTimeout(() => this.#retryLater(room, 'the join got no answer', 'warn'), JOIN_ANSWER_TIMEOUT_MS);
    return this.#o.send(xml('presence', { to: `${room}/${nick}` }, xml('x', { xmlns: NS_MUC }, xml('history', { maxstanzas: '0' }))));
  }

  /** A join made outside of a new session's: a failure to send it is one more failed attempt. */
  #joinOrRetry(room: string, nick: string): void {
    this.#join(room, nick).catch((err: unknown) => this.#retryLater(room, `the join could not be sent (${errorMessage(err)})`, 'debug'));
  }

  #refused(st: Element, room: string, nick: string, configured: string): void {
    const error = st.getChild('error');
    const condition = error?.getChildElements()[0]?.name ?? 'unknown';
    const type = error?.attrs.type ?? 'unknown';
    const a = this.#attemptsOf(room);
    clearTimeout(a.timer);
    a.timer = undefined;
    // A room that took the bot before (in this run or an earlier one) and refuses it now changed.
    const rejoin = a.count > 0 || this.#o.memory.joinedOnce.has(room);
    if (condition === 'conflict') {
      // Nick in use in this room: try it with "_" added, up to three times.
      const next = `${nick}_`;
      if (next.length > configured.length + 3) {
        if (rejoin) this.#leave(room, `the nick "${configured}" and its alternates are taken`);
        else this.#o.fail(new ChannelError('CHANNEL_CONFLICT', `XMPP: the nick "${configured}" and its alternates are taken in ${room}`));
        return;
      }
      this.#o.log.info({ channel: this.#o.channel, room, nick, next }, 'XMPP room nick in use; trying an alternate');
      this.#trying.set(room, next);
      this.#joinOrRetry(room, next);
      return;
    }
    // RFC 6120 §8.3.2: "wait" is a temporary refusal, to retry after waiting.
    if (type === 'wait') {
      this.#retryLater(room, `the room refused the join for now (${condition}, type wait)`, 'warn');
      return;
    }
    if (rejoin) {
      this.#leave(room, `the rejoin was refused (${condition}, type ${type})`);
      return;
    }
    if (condition === 'forbidden') {
      this.#o.fail(new ChannelError('CHANNEL_BANNED', `XMPP: the bot is banned from ${room} (forbidden)`));
      return;
    }
    this.#o.fail(new ChannelError('CHANNEL_FORBIDDEN', `XMPP: cannot join ${room} (${condition}, type ${type})`));
  }

  /** Our own unavailable presence from `room`: we are out of it. */
  #removed(st: Element, room: string, codes: ReadonlySet<string | undefined>, user: Element | undefined): void {
    this.joined.delete(room);
    this.#trying.delete(room);
    const destroy = user?.getChild('destroy');
    // The moderator's reason, the owner's (destroy), or the room's own status text (Prosody's for 333).
    const said = user?.getChild('item')?.getChildText('reason') || destroy?.getChildText('reason') || st.getChildText('status') || 'no reason given';
    if (codes.has('307') || codes.has('301')) {
      const kicked = codes.has('307');
      this.#o.log.warn(
        { channel: this.#o.channel, room, reason: said, status: kicked ? 307 : 301 },
        `XMPP removed from a room: ${kicked ? 'kicked' : 'banned'}`,
      );
      this.#o.fail(
        kicked
          ? new ChannelError('CHANNEL_KICKED', `XMPP: kicked from ${room} (${said}); not rejoining`)
          : new ChannelError('CHANNEL_BANNED', `XMPP: banned from ${room} (${said})`),
      );
      return;
    }
    if (destroy) {
      const venue = destroy.attrs.jid ? `; its owner points to ${destroy.attrs.jid}` : '';
      this.#leave(room, `the room was destroyed (${said})${venue}`);
      return;
    }
    if (codes.has('321') || codes.has('322')) {
      const why = codes.has('321')
        ? `the bot's affiliation changed and it may no longer be in the room (status 321: ${said})`
        : `the room became members-only and the bot is not a member (status 322: ${said})`;
      this.#leave(room, why);
      return;
    }
    const known = [...codes].find((c) => c !== undefined && c in TRANSIENT);
    const why = known ? TRANSIENT[known]! : 'the room sent the bot out without a status code';
    this.#retryLater(room, `${why}: ${said}`, 'warn', 'XMPP removed from a room; rejoining');
  }

  /** Another attempt at `room` after the backoff: it doubles with each failed attempt, up to REJOIN_MAX_DELAY_MS. */
  #retryLater(room: string, why: string, level: 'warn' | 'debug', msg = 'XMPP room not joined; trying again'): void {
    if (this.#closed || this.#o.signal.aborted || this.#left.has(room)) return;
    const a = this.#attemptsOf(room);
    clearTimeout(a.timer);
    if (a.joinedAt !== undefined && Date.now() - a.joinedAt >= REJOIN_STABLE_MS) a.count = 0;
    a.joinedAt = undefined;
    a.count++;
    a.why = why;
    const ceilingMs = Math.min(REJOIN_MAX_DELAY_MS, REJOIN_BASE_DELAY_MS * 2 ** (a.count - 1));
    // Half of it at least, the rest at random: rooms removed together (a service restart) are not joined together.
    const retryInMs = Math.round(ceilingMs / 2 + (Math.random() * ceilingMs) / 2);
    a.timer = setTimeout(() => this.#rejoin(room), retryInMs);
    this.#o.log[level]({ channel: this.#o.channel, room, reason: why, attempt: a.count, retryInMs }, msg);
  }

  #rejoin(room: string): void {
    const a = this.#attemptsOf(room);
    a.timer = undefined;
    if (this.#closed || this.joined.has(room) || this.#left.has(room)) return;
    // Offline, a new session joins every room anyway; a resumed one needs this attempt.
    if (!this.#o.online()) {
      this.#retryLater(room, a.why ?? 'not connected', 'debug');
      return;
    }
    this.#joinOrRetry(room, this.#o.rooms.find((r) => r.jid === room)!.nick);
  }

  #leave(room: string, why: string): void {
    clearTimeout(this.#attempts.get(room)?.timer);
    this.#attempts.delete(room);
    this.joined.delete(room);
    this.#left.set(room, why);
    this.#o.log.error({ channel: this.#o.channel, room, reason: why }, 'XMPP out of a room: not rejoining until the channel restarts');
  }

  #attemptsOf(room: string): Attempts {
    let a = this.#attempts.get(room);
    if (!a) {
      a = { count: 0, timer: undefined, joinedAt: undefined, why: undefined };
      this.#attempts.set(room, a);
    }
    return a;
  }
}
