import type { ChannelConfig } from '../config/schema.js';
import type { ChannelMessage } from './message.js';

export type AccessVerdict = 'ok' | 'self' | 'bot' | 'not_allowed' | 'unaddressed';

/** Who may talk to the bot: never itself, bots only when allowed, senders on allow_from, mentions in groups. */
export function checkAccess(msg: ChannelMessage, ch: ChannelConfig, selfId: string | undefined): AccessVerdict {
  if (selfId !== undefined && msg.sender.id === selfId) return 'self';
  if (msg.sender.isBot && !ch.allow_bots) return 'bot';
  const allow = ch.allow_from ?? ['*'];
  if (!allow.includes('*') && !allow.includes(msg.sender.id)) return 'not_allowed';
  if (msg.chat.type !== 'dm' && ch.require_mention && !msg.addressed) return 'unaddressed';
  return 'ok';
}

/** Remembers when each sender was last told they are not allowed, so they hear it once an hour. */
export class NoticeLimiter {
  readonly #last = new Map<string, number>();
  constructor(private readonly everyMs = 3_600_000) {}

  /** True when a notice may be sent now (and records it). */
  take(key: string, nowMs = Date.now()): boolean {
    const last = this.#last.get(key);
    if (last !== undefined && nowMs - last < this.everyMs) return false;
    if (this.#last.size > 10_000) {
      for (const [k, t] of this.#last) if (nowMs - t >= this.everyMs) this.#last.delete(k);
    }
    this.#last.set(key, nowMs);
    return true;
  }
}

/** Unaddressed group messages kept per scope as context for the next addressed turn. */
export class PassiveContext {
  readonly #byScope = new Map<string, ChannelMessage[]>();
  constructor(private readonly keep = 20) {}

  add(scope: string, msg: ChannelMessage): void {
    const list = this.#byScope.get(scope) ?? [];
    list.push(msg);
    if (list.length > this.keep) list.shift();
    this.#byScope.set(scope, list);
  }

  /** What was gathered for a scope, without taking it. */
  peek(scope: string): readonly ChannelMessage[] {
    return this.#byScope.get(scope) ?? [];
  }

  /** Takes one message back out (it is being answered itself). */
  remove(scope: string, messageId: string): void {
    const list = this.#byScope.get(scope);
    if (!list) return;
    const i = list.findIndex((m) => m.messageId === messageId);
    if (i >= 0) list.splice(i, 1);
    if (!list.length) this.#byScope.delete(scope);
  }

  /** Takes (and clears) what was gathered for a scope. */
  take(scope: string): ChannelMessage[] {
    const list = this.#byScope.get(scope) ?? [];
    this.#byScope.delete(scope);
    return list;
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
