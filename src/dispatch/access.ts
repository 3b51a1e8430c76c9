import type { ChannelConfig } from '../config/schema.js';
import type { ChannelMessage } from '../contracts/message.js';

/** `ignored`: a sender not on allow_from chatting in a group without addressing the bot. */
export type AccessVerdict = 'ok' | 'self' | 'bot' | 'not_allowed' | 'ignored' | 'unaddressed';

/**
 * A schedule's firing, or what its turn set going that comes back as a message of its own (a
 * reminder set with `schedule_message`, a background tool's result): these carry the firing's
 * kind and sender (src/daemon/schedules.ts), no person's, and only channeld makes synthetic
 * messages. The operator's `[[schedules]]` table let the firing in; the rest follows from it.
 */
const ofSchedule = (msg: ChannelMessage): boolean =>
  msg.synthetic?.kind === 'schedule' || (msg.synthetic !== undefined && msg.kind === 'schedule' && msg.sender.id.startsWith('schedule:'));

/**
 * Who may talk to the bot: never itself, bots only when allowed, senders on allow_from,
 * mentions in groups. In a group only a message that addresses the bot may earn a "not
 * allowed" notice; the group's ordinary chatter from others is none of the bot's business.
 * A schedule's messages pass as the schedule does; a reminder a person set is checked again
 * when it fires (they may have been taken off allow_from since).
 */
export function checkAccess(msg: ChannelMessage, ch: ChannelConfig, selfId: string | undefined): AccessVerdict {
  if (ofSchedule(msg)) return 'ok';
  if (selfId !== undefined && msg.sender.id === selfId) return 'self';
  if (msg.sender.isBot && !ch.allow_bots) return 'bot';
  const allow = ch.allow_from ?? ['*'];
  if (!allow.includes('*') && !allow.includes(msg.sender.id)) return msg.chat.type === 'dm' || msg.addressed ? 'not_allowed' : 'ignored';
  if (msg.chat.type !== 'dm' && ch.require_mention && !msg.addressed) return 'unaddressed';
  return 'ok';
}

/** Remembers when each sender was last told they are not allowed, so they hear it once an hour. */
export class NoticeLimiter {
  readonly #last = new Map<string, number>();
  constructor(
    private readonly everyMs = 3_600_000,
    /** At most this many senders are remembered (oldest forgotten first): keys are user input. */
    private readonly maxEntries = 10_000,
    private readonly onEvict: (count: number) => void = () => {},
  ) {}

  /** True when a notice may be sent now (and records it). */
  take(key: string, nowMs = Date.now()): boolean {
    const last = this.#last.get(key);
    if (last !== undefined && nowMs - last < this.everyMs) return false;
    this.#last.delete(key);
    this.#last.set(key, nowMs);
    let evicted = 0;
    // Oldest first: the map is in the order notices were sent.
    for (const k of this.#last.keys()) {
      if (this.#last.size <= this.maxEntries) break;
      this.#last.delete(k);
      evicted++;
    }
    if (evicted) this.onEvict(evicted);
    return true;
  }

  get size(): number {
    return this.#last.size;
  }
}

export interface PassiveBounds {
  maxConversations: number;
  maxBytes: number;
}

/** About what a kept message costs: its text and sender name (UTF-16) plus the object around it. */
function passiveBytes(msg: ChannelMessage): number {
  return 2 * (msg.text.length + msg.sender.name.length) + 512;
}

/**
 * Unaddressed group messages kept per scope as context for the next addressed turn:
 * `keep` per conversation, and across conversations the bounds (count and bytes), least
 * recently active conversation evicted first. Every chat of every group the bot is in
 * feeds this, so it must not grow with them.
 */
export class PassiveContext {
  readonly #byScope = new Map<string, { list: ChannelMessage[]; bytes: number }>();
  #bytes = 0;
  constructor(
    private readonly keep = 20,
    private readonly bounds: () => PassiveBounds = () => ({ maxConversations: 1000, maxBytes: 8 * 1024 * 1024 }),
    private readonly onEvict: (count: number) => void = () => {},
  ) {}

  add(scope: string, msg: ChannelMessage): void {
    const entry = this.#byScope.get(scope) ?? { list: [], bytes: 0 };
    // Re-inserted: the map's order is least recently active first.
    this.#byScope.delete(scope);
    this.#byScope.set(scope, entry);
    entry.list.push(msg);
    entry.bytes += passiveBytes(msg);
    this.#bytes += passiveBytes(msg);
    // Past `keep` the oldest message of this conversation goes: ordinary, not an eviction.
    if (entry.list.length > this.keep) this.#drop(entry, entry.list.shift()!);
    let evicted = 0;
    const { maxConversations, maxBytes } = this.bounds();
    while (this.#byScope.size > maxConversations || this.#bytes > maxBytes) {
      const [oldScope, oldest] = this.#byScope.entries().next().value!;
      // The newest message alone may exceed the bytes: then it goes too.
      const gone = oldest.list.shift();
      if (gone) {
        this.#drop(oldest, gone);
        evicted++;
      }
      if (!oldest.list.length) this.#byScope.delete(oldScope);
    }
    if (evicted) this.onEvict(evicted);
  }

  #drop(entry: { bytes: number }, msg: ChannelMessage): void {
    entry.bytes -= passiveBytes(msg);
    this.#bytes -= passiveBytes(msg);
  }

  /** What was gathered for a scope, without taking it. */
  peek(scope: string): readonly ChannelMessage[] {
    return this.#byScope.get(scope)?.list ?? [];
  }

  /** Takes one message back out (it is being answered itself). */
  remove(scope: string, messageId: string): void {
    const entry = this.#byScope.get(scope);
    if (!entry) return;
    const i = entry.list.findIndex((m) => m.messageId === messageId);
    if (i >= 0) this.#drop(entry, entry.list.splice(i, 1)[0]!);
    if (!entry.list.length) this.#byScope.delete(scope);
  }

  /** Takes (and clears) what was gathered for a scope. */
  take(scope: string): ChannelMessage[] {
    const entry = this.#byScope.get(scope);
    if (!entry) return [];
    this.#byScope.delete(scope);
    this.#bytes -= entry.bytes;
    return entry.list;
  }

  /** Conversations and approximate bytes held now. */
  get size(): { conversations: number; bytes: number } {
    return { conversations: this.#byScope.size, bytes: this.#bytes };
  }
}

/** How often one group's unaddressed messages may be judged by the intent classifier. */
export const INTENT_MIN_GAP_MS = 2000;

/**
 * Rate limit of the intent classifier per group: one call in flight, and at least
 * `minGapMs` between calls. A message that finds the group limited is ignored (kept as context).
 */
export class IntentLimiter {
  readonly #last = new Map<string, number>();
  constructor(private readonly minGapMs = INTENT_MIN_GAP_MS) {}

  take(group: string, nowMs = Date.now()): boolean {
    const last = this.#last.get(group);
    if (last !== undefined && nowMs - last < this.minGapMs) return false;
    if (this.#last.size > 10_000) for (const [k, t] of this.#last) if (nowMs - t >= this.minGapMs) this.#last.delete(k);
    this.#last.set(group, nowMs);
    return true;
  }
}
