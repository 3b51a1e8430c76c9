import type { ChannelConfig } from '../config/schema.js';
import type { ChannelMessage } from './message.js';

/** `ignored`: a sender not on allow_from chatting in a group without addressing the bot. */
export type AccessVerdict = 'ok' | 'self' | 'bot' | 'not_allowed' | 'ignored' | 'unaddressed';

/**
 * Who may talk to the bot: never itself, bots only when allowed, senders on allow_from,
 * mentions in groups. In a group only a message that addresses the bot may earn a "not
 * allowed" notice; the group's ordinary chatter from others is none of the bot's business.
 */
export function checkAccess(msg: ChannelMessage, ch: ChannelConfig, selfId: string | undefined): AccessVerdict {
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

  /** Takes (and clears) what was gathered for a scope. */
  take(scope: string): ChannelMessage[] {
    const list = this.#byScope.get(scope) ?? [];
    this.#byScope.delete(scope);
    return list;
  }
}
