import type { JsMsg } from '@nats-io/jetstream';
import type { MessageRef } from '../contracts/message.js';
import type { WaitingForChannelStatus } from '../contracts/topology.js';
import type { Logger } from '../observe/logger.js';
import type { StreamedItem } from './inbox.js';

/** An item of a partition as its consumer received it, with what a takeover found of its draft. */
export interface Received {
  m: JsMsg;
  item: StreamedItem;
  replyRefs: MessageRef[];
}

/**
 * How long an item waits for its channel before it is let go. A reload is per instance, so
 * while an operator reloads the instances one after another (seconds to minutes) their channels
 * differ; a channel still missing after this long was removed, as a removed channel's queued
 * items are dropped on one node.
 */
export const CHANNEL_WAIT_MAX_MS = 15 * 60_000;

/**
 * The most items one partition keeps waiting. They hold the consumer's unacked slots (10,000):
 * a busy channel missing here must not stall every other conversation of the partition, so
 * past this one more is let go as a removed channel's would be (logged as an error).
 */
export const MAX_WAITING_PER_PARTITION = 1000;

/** How often the warning about waiting items is repeated while they wait. */
const WARN_EVERY_MS = 60_000;

/**
 * The items of one owned partition whose channel this instance does not run (its config
 * lacks it: another instance, reloaded first, took them in). They stay unacked in the stream
 * and wait here, in order, until the channel appears (a reload here) or the partition moves;
 * running them would end their turns unanswered and ack them, and the messages would be lost.
 * A later item of a waiting channel waits behind the earlier ones, so a conversation keeps
 * its order.
 */
export class WaitingForChannel {
  readonly #items: Received[] = [];
  /** Per channel: how many of its items wait (a lookup per received item, not a scan). */
  readonly #perChannel = new Map<string, number>();
  /** Per channel: when its waiting items were last logged. */
  readonly #warnedAtMs = new Map<string, number>();

  constructor(
    private readonly partition: number,
    private readonly log: Logger,
  ) {}

  get size(): number {
    return this.#items.length;
  }

  /** How many items wait, per channel id (for /status: they are not turns yet, so nothing else counts them). */
  byChannel(): ReadonlyMap<string, number> {
    return this.#perChannel;
  }

  /**
   * Takes out the waiting items of `scope` (`senderId`'s only, when given: a /stop of the
   * conversation, they go as its queued items do); the others keep waiting, in order.
   */
  takeScope(scope: string, senderId?: string): Received[] {
    const taken = (r: Received) => r.item.scope === scope && (senderId === undefined || r.item.message.sender.id === senderId);
    const gone = this.#items.filter(taken);
    if (gone.length) this.#keep(this.#items.filter((r) => !taken(r)));
    return gone;
  }

  /** Whether an item of `channelId` must wait: this instance does not run the channel, or earlier items of it wait. */
  holds(channelId: string, known: boolean): boolean {
    return !known || this.#perChannel.has(channelId);
  }

  /** `known`: the channel runs here now (the item waits only behind earlier ones, queued at the next step), never let go. */
  add(r: Received, nowMs: number, known = false): void {
    const channelId = r.item.message.channelId;
    if (!known && this.#items.length >= MAX_WAITING_PER_PARTITION) {
      this.log.error(
        { partition: this.partition, channel: channelId, messageId: r.item.message.messageId, waiting: this.#items.length },
        'a message for a channel not configured on this instance was dropped: too many already wait in its partition',
      );
      r.m.term();
      return;
    }
    this.#items.push(r);
    this.#perChannel.set(channelId, (this.#perChannel.get(channelId) ?? 0) + 1);
    this.#warn(channelId, nowMs);
  }

  /**
   * Queues, in order and one after another, the items whose channel this instance runs now (a
   * balancing step after a reload added it). `admit` reads the item's conversation state
   * (PostgreSQL) and calls `claim` just before it queues the item: until then the item stays
   * here, counted by /status and found by a /stop's takeScope (`claim` then says false and
   * the item is not queued). Taken out all at once, the items whose read was still to come
   * were nowhere: a /stop answered "Nothing to stop." and they were answered after it. `admit`
   * resolving false (the partition is being given up) ends the step; the rest stay until the
   * partition goes. An item that waited past CHANNEL_WAIT_MAX_MS is let go first (terminated
   * in the stream, logged as an error); the warning about the others is repeated once a minute.
   */
  async admitReady(known: (channelId: string) => boolean, nowMs: number, admit: (r: Received, claim: () => boolean) => Promise<boolean>): Promise<void> {
    for (const r of this.#expire(known, nowMs)) {
      if (!this.#items.includes(r)) continue; // a /stop took it while an earlier one was read
      if (!(await admit(r, () => this.#claim(r)))) return;
    }
  }

  /** Lets go of the items waiting too long for a channel still missing; says which ones can run now (left in the list, in order). */
  #expire(known: (channelId: string) => boolean, nowMs: number): Received[] {
    const ready: Received[] = [];
    const kept: Received[] = [];
    for (const r of this.#items) {
      const channelId = r.item.message.channelId;
      if (known(channelId)) {
        ready.push(r);
        kept.push(r);
      } else if (nowMs - r.m.time.getTime() > CHANNEL_WAIT_MAX_MS) {
        this.log.error(
          { partition: this.partition, channel: channelId, messageId: r.item.message.messageId, waitedMs: CHANNEL_WAIT_MAX_MS },
          'a message for a channel not configured on this instance waited too long and was dropped',
        );
        r.m.term();
      } else {
        kept.push(r);
        this.#warn(channelId, nowMs);
      }
    }
    this.#keep(kept);
    return ready;
  }

  /** Takes `r` out to be queued; false when a /stop took it meanwhile. */
  #claim(r: Received): boolean {
    const i = this.#items.indexOf(r);
    if (i < 0) return false;
    this.#items.splice(i, 1);
    const channelId = r.item.message.channelId;
    const left = (this.#perChannel.get(channelId) ?? 1) - 1;
    if (left > 0) this.#perChannel.set(channelId, left);
    else this.#perChannel.delete(channelId);
    return true;
  }

  /** Keeps only `kept` (in order) and counts them again per channel. */
  #keep(kept: Received[]): void {
    this.#items.splice(0, this.#items.length, ...kept);
    this.#perChannel.clear();
    for (const r of kept) this.#perChannel.set(r.item.message.channelId, (this.#perChannel.get(r.item.message.channelId) ?? 0) + 1);
  }

  #warn(channelId: string, nowMs: number): void {
    const last = this.#warnedAtMs.get(channelId);
    if (last !== undefined && nowMs - last < WARN_EVERY_MS) return;
    this.#warnedAtMs.set(channelId, nowMs);
    const waiting = this.#perChannel.get(channelId) ?? 1;
    this.log.warn(
      { partition: this.partition, channel: channelId, waiting },
      'messages wait: their channel is not configured on this instance (its config differs from the instance that took them in); they run once a reload adds it',
    );
  }
}

/** For /status: the items waiting in `lists` (one per partition), in all and per channel id. */
export function waitingStatus(lists: Iterable<WaitingForChannel>): WaitingForChannelStatus {
  const byChannel: Record<string, number> = {};
  let total = 0;
  for (const w of lists)
    for (const [id, n] of w.byChannel()) {
      byChannel[id] = (byChannel[id] ?? 0) + n;
      total += n;
    }
  return { total, by_channel: byChannel };
}
