import type { JsMsg } from '@nats-io/jetstream';
import type { ChannelMessage, MessageRef } from '../contracts/message.js';
import { CodedError, errorMessage } from '../contracts/errors.js';
import type { Logger } from '../observe/logger.js';
import type { InboxItem, InboxState, StopOrder, StopResult } from '../contracts/topology.js';
import type { ClusterServices } from './connect.js';
import type { PgWriter } from './pg-writer.js';
import type { ParsedCommand } from '../contracts/commands.js';
import { ControlRouter } from './controls.js';
import { partitionOf, scopeToken } from './partition-key.js';
import { natsTraceHeaders } from './trace-headers.js';

/** What travels in the stream: the message, its scope and the unaddressed context before it. */
export interface StreamedItem {
  scope: string;
  message: ChannelMessage;
  passive: ChannelMessage[];
}

interface Tracked {
  msg: JsMsg;
  channelId: string;
  messageId: string;
  scope: string;
  partition: number;
  /** The commit of the item's final state, then its ack. */
  tail: Promise<void>;
  /** The partition's lease was lost: nothing more is written or acked for this item. */
  fenced: boolean;
  /**
   * The item as the lanes got it: the lifecycle moves this object's state, so a hand-back's
   * released items are told from its running ones (dropReleased); unset once a /stop dropped it.
   */
  queued?: InboxItem;
}

/**
 * What travels on `<ns>.stop.<scope token>`: a chat /stop (the scope's running turn and
 * its queue, as on one node) or, with `turn`, the operator's stop of that one turn.
 */
export interface StopRequest {
  scope: string;
  turn?: string;
  /**
   * Whose work a chat /stop ends (src/contracts/topology.ts StopOrder). A request without it
   * (an instance of an older build) ends everything in the scope, and its sender reads only
   * `stopped` and `nothing`; with it, the owner answers with a StopResult as JSON.
   */
  order?: StopOrder;
}

/** Operation counts since start, for the bench and /status. */
export interface ClusterOps {
  natsPublishes: number;
  natsAcks: number;
  natsStops: number;
  /** Control commands (/approve, /deny, /stop tool) sent to the instance that runs the turn. */
  natsControls: number;
  /** Items received from the partition consumers (takeovers receive some again). */
  natsDeliveries: number;
  pgReads: number;
}

/**
 * The shared inbox: a JetStream stream (work-queue retention) with one subject per
 * partition. A message is published with `channel:message id` as its Nats-Msg-Id, so a
 * platform's redelivery within the stream's duplicate window is dropped by the server;
 * the deliver promise (and so the platform's ack) waits for the stream's acknowledgement.
 * An item's progress (reply refs, final state) goes to PostgreSQL through the group commit;
 * the stream message is acked only after its final state is committed, so an instance that takes a partition
 * over finds every unanswered item still in the stream and, in PostgreSQL, the draft to
 * continue.
 */
export class ClusterInbox {
  readonly #tracked = new Map<number, Tracked>();
  readonly #controls: ControlRouter;
  readonly ops: ClusterOps = { natsPublishes: 0, natsAcks: 0, natsStops: 0, natsControls: 0, natsDeliveries: 0, pgReads: 0 };

  constructor(
    private readonly s: ClusterServices,
    private readonly log: Logger,
    /** The write-behind queue shared with the state stores (one group commit for a turn's writes). */
    private readonly w: PgWriter,
  ) {
    this.#controls = new ControlRouter(s, w, log);
  }

  /** Resolves once the message (with the context it carries) is durably stored in the stream; `full` past `max_queued`. */
  async publish(msg: ChannelMessage, scope: string, passive: ChannelMessage[]): Promise<'stored' | 'duplicate' | 'full'> {
    const subject = this.s.names.inboxSubject(partitionOf(scope, this.s.config.partitions));
    const body = JSON.stringify({ scope, message: msg, passive } satisfies StreamedItem);
    this.ops.natsPublishes++;
    try {
      const trace = natsTraceHeaders();
      const ack = await this.s.js.publish(subject, body, { msgID: `${msg.channelId}:${msg.messageId}`, timeout: 5000, ...(trace ? { headers: trace } : {}) });
      return ack.duplicate ? 'duplicate' : 'stored';
    } catch (err) {
      if (/maximum messages/i.test(errorMessage(err))) return 'full';
      // Retryable: the adapter does not ack the platform, which delivers the message again.
      throw new CodedError('CLUSTER_UNAVAILABLE', `the shared inbox did not store message ${msg.messageId}: ${errorMessage(err)}`, { cause: err });
    }
  }

  /** False for a command seen before: a redelivered /stop or control finds its key and is not acted on twice. */
  async #firstTime(msg: ChannelMessage): Promise<boolean> {
    try {
      await this.s.stops.create(`${scopeToken(msg.channelId)}.${scopeToken(msg.messageId)}`, '1');
      return true;
    } catch (err) {
      if (/wrong last sequence|key exists/i.test(errorMessage(err))) return false;
      this.log.warn({ err }, 'a control command could not be recorded; acting on it anyway');
      return true;
    }
  }

  /** Ends what `order` names of the scope's turn and queue wherever they run (undefined: a refused /stop, only recorded). */
  async stop(msg: ChannelMessage, scope: string, order: StopOrder | undefined): Promise<StopResult | 'duplicate'> {
    if (!(await this.#firstTime(msg))) return 'duplicate';
    const nothing = { cancelled: false, dropped: 0 };
    if (!order) return nothing;
    this.ops.natsStops++;
    try {
      // Only the instance that owns the scope's partition answers.
      const reply = await this.s.nc.request(this.s.names.stopSubject(scopeToken(scope)), JSON.stringify({ scope, order } satisfies StopRequest), {
        timeout: 400,
      });
      return stopResultOf(reply.string());
    } catch {
      return nothing; // nobody owns the partition right now: nothing runs
    }
  }

  /**
   * A bare `/stop` in a group (not addressed to the bot: context, unless it is for a turn of
   * the sender's) from a sender with no turn on this instance: ends the sender's own running
   * turn and queued messages on the partition's owner. Undefined when nothing of theirs was
   * there (or no instance answers: the partition is changing hands, or its owner is an older
   * build, which leaves the message context as it did).
   */
  async stopBare(msg: ChannelMessage, scope: string): Promise<StopResult | 'duplicate' | undefined> {
    if (!(await this.#firstTime(msg))) return 'duplicate';
    this.ops.natsStops++;
    const order: StopOrder = { senderId: msg.sender.id, runningOfAnyone: false };
    try {
      const reply = await this.s.nc.request(this.s.names.bareStopSubject(scopeToken(scope)), JSON.stringify({ scope, order } satisfies StopRequest), {
        timeout: 400,
      });
      const result = stopResultOf(reply.string());
      return result.cancelled || result.dropped > 0 ? result : undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * Runs a control command on the instance that runs the turn it acts on (its
   * `Dispatcher.runControl`); `here` runs it on this instance when no instance runs that turn now.
   */
  async control(msg: ChannelMessage, scope: string, cmd: ParsedCommand, here: () => Promise<string | undefined>): Promise<string | undefined | 'duplicate'> {
    if (!(await this.#firstTime(msg))) return 'duplicate';
    this.ops.natsControls++;
    return this.#controls.send(msg, scope, cmd, here);
  }

  /**
   * The operator's stop of one turn by id (its first item's stream sequence), wherever it
   * runs: the item, still in the stream until it is answered, names the scope, and the
   * request goes to that scope's /stop subject, which only the partition's owner answers.
   */
  async stopTurn(id: string): Promise<'cancelled' | 'dropped' | undefined> {
    const seq = Number(id);
    if (!Number.isSafeInteger(seq) || seq <= 0) return undefined;
    let scope: string;
    try {
      const stored = await this.s.jsm.streams.getMessage(this.s.names.stream, { seq });
      if (!stored) return undefined;
      scope = stored.json<StreamedItem>().scope;
    } catch {
      return undefined; // answered (acked and gone) or never there
    }
    this.ops.natsStops++;
    try {
      const reply = await this.s.nc.request(this.s.names.stopSubject(scopeToken(scope)), JSON.stringify({ scope, turn: id } satisfies StopRequest), {
        timeout: 1000,
      });
      const r = reply.string();
      return r === 'cancelled' || r === 'dropped' ? r : undefined;
    } catch {
      return undefined; // nobody owns the partition right now: nothing runs
    }
  }

  /** Called by the partition consumer for every item it hands to the dispatcher (`queued`), or drops before. */
  track(seq: number, msg: JsMsg, item: StreamedItem, partition: number, queued?: InboxItem): void {
    this.#tracked.set(seq, {
      msg,
      channelId: item.message.channelId,
      messageId: item.message.messageId,
      scope: item.scope,
      partition,
      tail: Promise.resolve(),
      fenced: false,
      queued,
    });
  }

  /**
   * A /stop while `partition` is handed back: the lanes released its queued items (`pending`
   * again, unacked for the next owner), so they no longer drop them. Those of `scope`
   * (`senderId`'s only, when given) are recorded `failed` with `reason` and acked, before the
   * lease goes (`settle` waits for them). A running turn's items are its own end's to record.
   */
  dropReleased(partition: number, scope: string, senderId: string | undefined, reason: string): number {
    let dropped = 0;
    for (const [seq, t] of this.#tracked) {
      const it = t.queued;
      if (t.partition !== partition || t.scope !== scope || t.fenced || it?.state !== 'pending') continue;
      if (senderId !== undefined && it.message.sender.id !== senderId) continue;
      t.queued = undefined;
      this.setState(seq, 'failed', reason);
      dropped++;
    }
    return dropped;
  }

  /** What PostgreSQL knows of an item (a takeover continues its draft or skips it when finished). */
  async progress(channelId: string, messageId: string): Promise<{ state: InboxState; replyRefs: MessageRef[] } | undefined> {
    this.ops.pgReads++;
    const { rows } = await this.s.pool.query<{ state: InboxState; reply_refs: MessageRef[] }>(
      'SELECT state, reply_refs FROM items WHERE channel_id = $1 AND message_id = $2',
      [channelId, messageId],
    );
    return rows[0] && { state: rows[0].state, replyRefs: rows[0].reply_refs };
  }

  /** Acks an item that was finished before (found in PostgreSQL after a takeover). */
  ackFinished(msg: JsMsg): void {
    this.ops.natsAcks++;
    msg.ack();
  }

  setReplyRefs(id: number, refs: readonly MessageRef[]): void {
    const t = this.#tracked.get(id);
    if (!t || t.fenced) return;
    this.w.add(
      `INSERT INTO items (channel_id, message_id, scope, state, reply_refs, updated_at) VALUES ($1, $2, $3, 'running', $4, $5)
       ON CONFLICT (channel_id, message_id) DO UPDATE SET reply_refs = excluded.reply_refs, updated_at = excluded.updated_at`,
      [t.channelId, t.messageId, t.scope, JSON.stringify(refs), Date.now()],
    );
  }

  /**
   * The item's final state rides the group commit with the turn's other writes (session,
   * turns, usage: queued before it, so committed with it or earlier); the stream message is
   * acked once that commit is done, unless the partition was lost meanwhile.
   */
  setState(id: number, state: InboxState, error?: string): void {
    const t = this.#tracked.get(id);
    if (!t || t.fenced || state === 'pending' || state === 'running') return;
    this.w.add(
      `INSERT INTO items (channel_id, message_id, scope, state, error, updated_at) VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (channel_id, message_id) DO UPDATE SET state = excluded.state, error = excluded.error, updated_at = excluded.updated_at`,
      [t.channelId, t.messageId, t.scope, state, error ?? null, Date.now()],
    );
    t.tail = this.w.flush().then(() => {
      if (t.fenced) return;
      this.ops.natsAcks++;
      t.msg.ack();
      this.#tracked.delete(id);
    });
  }

  /**
   * The turn stopped unfinished (handed over, or the process stops): no state and no ack, so
   * the next owner runs it; its reply refs are committed before the partition is given up
   * (`settle` waits for this tail), so that owner edits its messages instead of posting anew.
   */
  interrupted(id: number): void {
    const t = this.#tracked.get(id);
    if (!t || t.fenced) return;
    t.tail = this.w.flush();
  }

  /**
   * Resolves when every write of `partition`'s items has settled (before its lease is given
   * up), those added while it waits too: a /stop answered meanwhile records dropped items.
   */
  async settle(partition: number): Promise<void> {
    const tails = () => [...this.#tracked.values()].filter((t) => t.partition === partition).map((t) => t.tail);
    for (let waited = new Set<Promise<void>>(); ; ) {
      const now = tails();
      if (now.every((tail) => waited.has(tail))) return;
      waited = new Set(now);
      await Promise.all(now);
    }
  }

  /**
   * Forgets a partition's items. `fence` (the lease was lost): their pending writes and acks
   * are dropped, the new owner decides about them.
   */
  forget(partition: number, fence: boolean): void {
    for (const [seq, t] of this.#tracked) {
      if (t.partition !== partition) continue;
      if (fence) t.fenced = true;
      this.#tracked.delete(seq);
    }
  }

  /** Items handed to the dispatcher and not yet acked. */
  get size(): number {
    return this.#tracked.size;
  }
}

/**
 * The owner's answer to a chat /stop: a StopResult as JSON, or an older build's `stopped`
 * (something ended; its reply then says so) or `nothing`.
 */
function stopResultOf(answer: string): StopResult {
  if (answer === 'stopped') return { cancelled: false, dropped: 1 };
  try {
    const r = JSON.parse(answer) as Partial<StopResult>;
    return { cancelled: r.cancelled === true, dropped: typeof r.dropped === 'number' ? r.dropped : 0 };
  } catch {
    return { cancelled: false, dropped: 0 };
  }
}
