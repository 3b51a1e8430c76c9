import { AckPolicy, DeliverPolicy, type ConsumerMessages, type JsMsg } from '@nats-io/jetstream';
import type { MessageRef } from '../contracts/message.js';
import type { InboxItem, TopologyWork, WaitingForChannelStatus } from '../contracts/topology.js';
import { errorMessage } from '../contracts/errors.js';
import type { Logger } from '../observe/logger.js';
import type { ClusterServices } from './connect.js';
import type { ClusterInbox, StreamedItem } from './inbox.js';
import { isResumable } from '../inbox/item.js';
import type { HeldLease } from './leases.js';
import { partitionOf } from './partition-key.js';
import { rememberCarrier } from '../observe/trace/ambient.js';
import { carrierOf } from './trace-headers.js';
import { WaitingForChannel, waitingStatus, type Received } from './waiting-channels.js';
import type { StoppablePartition } from './partition-stop.js';
import { backlogIn, pullExpiresMs, type Owned } from './owned-partition.js';

export interface PartitionHooks {
  /** Called before a newly owned partition is consumed: cached state of its scopes may be stale. */
  onAcquired(partition: number): void;
  /** Awaited before an item is queued (the conversation's queue mode is read then). */
  beforeEnqueue(scope: string, channelId: string): Promise<void>;
}

/**
 * Turn distribution: the conversation space is cut into `[cluster] partitions` by a hash of
 * the scope; each partition has a lease and a durable consumer, and is consumed by exactly
 * one instance at a time, which runs its conversations through the ordinary lanes (queue
 * modes, limits, busy reply) in stream order. Each instance aims at its even share of the
 * partitions among the live instances: it takes free ones up to that and hands surplus ones
 * back after their running turns end, so a joining instance gets its share and a dead one's
 * share is taken within the lease TTL plus one balancing step.
 */
export class Partitions {
  readonly #owned = new Map<number, Owned>();
  readonly #stop = new AbortController();
  #timer: NodeJS.Timeout | undefined;
  #balancing = false;

  constructor(
    private readonly s: ClusterServices,
    private readonly inbox: ClusterInbox,
    private readonly dispatcher: TopologyWork,
    private readonly log: Logger,
    private readonly graceMs: () => number,
    private readonly hooks: PartitionHooks,
  ) {}

  get stepMs(): number {
    return Math.max(100, Math.floor(this.s.config.lease_ttl_ms / 5));
  }

  start(): void {
    const tick = () => {
      this.#admitWaiting();
      void this.#balance().finally(() => {
        if (!this.#stop.signal.aborted) this.#timer = setTimeout(tick, this.stepMs + Math.floor(Math.random() * this.stepMs));
      });
    };
    tick();
  }

  /** Partitions this instance consumes now. */
  owned(): number[] {
    return [...this.#owned.keys()].sort((a, b) => a - b);
  }

  /** The lease signal of the scope's partition while this instance consumes it. */
  leaseOf(scope: string): AbortSignal | undefined {
    return this.#owned.get(partitionOf(scope, this.s.config.partitions))?.lease.signal;
  }

  /** Items waiting for their channel in the partitions consumed here, in all and per channel id (/status: they are not turns yet). */
  waiting(): WaitingForChannelStatus {
    return waitingStatus([...this.#owned.values()].map((o) => o.waiting));
  }

  owns(scope: string): boolean {
    const o = this.#owned.get(partitionOf(scope, this.s.config.partitions));
    return o !== undefined && !o.leaving && !o.lease.signal.aborted;
  }

  /**
   * The scope's partition while a /stop of it is this instance's to answer (stopOnOwner): also
   * while it is handed back, until its running turns ended (up to shutdown_grace_ms) and their
   * writes settled, when nobody else owns it: unanswered, the /stop said "Nothing to stop." and
   * the next owner ran again what it stopped. A lost lease writes and acks nothing more.
   */
  stoppable(scope: string): StoppablePartition | undefined {
    const o = this.#owned.get(partitionOf(scope, this.s.config.partitions));
    return o && !o.lease.signal.aborted && !o.settled ? o : undefined;
  }

  /**
   * This instance's share: the partitions split as evenly as they go, the larger shares to
   * the first instances by id, so the shares add up to exactly `partitions`. (Everyone
   * aiming at ceil(partitions / instances) could settle at 6/6/4 for 16 over 3: nobody has
   * a surplus to hand back, and the third never gets its share.)
   */
  #target(): number {
    const me = this.s.instanceId;
    const live = this.s.leases
      .table('inst.')
      .filter((r) => !r.expired)
      .map((r) => r.owner);
    const ids = [...new Set([...live, me])].sort();
    const n = this.s.config.partitions;
    return Math.floor(n / ids.length) + (ids.indexOf(me) < n % ids.length ? 1 : 0);
  }

  async #balance(): Promise<void> {
    if (this.#balancing || this.#stop.signal.aborted) return;
    this.#balancing = true;
    try {
      const target = this.#target();
      const mine = [...this.#owned.values()].filter((o) => !o.leaving);
      if (mine.length > target) {
        // Every surplus partition at once, each handed back when its running turns end; the
        // balancing goes on meanwhile. (One per step, waiting for each, kept the first
        // instance of a cluster consuming most partitions for many seconds after the others
        // had joined: a kill of it then stalled most conversations.)
        for (const o of mine.slice(target))
          this.#leave(o, 'rebalancing').catch((err: unknown) => this.log.error({ err, partition: o.partition }, 'partition hand-back failed'));
        return;
      }
      const n = this.s.config.partitions;
      // Instances start their search at different points, so they rarely race for one key.
      const offset = Math.floor(Math.random() * n);
      const free: number[] = [];
      for (let i = 0; i < n && this.#owned.size + free.length < target; i++) {
        const p = (offset + i) % n;
        if (!this.#owned.has(p) && !this.s.leases.ownerOf(`part.${p}`)) free.push(p);
      }
      // Taken together: a takeover of a dead instance's share is one round of NATS requests, not one per partition.
      await Promise.all(
        free.map(async (p) => {
          const lease = await this.s.leases.tryAcquire(`part.${p}`).catch((err: unknown) => {
            this.log.warn({ err, partition: p }, 'partition lease attempt failed');
            return undefined;
          });
          if (!lease) return;
          if (this.#stop.signal.aborted) return void (await lease.release());
          await this.#own(p, lease);
        }),
      );
    } finally {
      this.#balancing = false;
    }
  }

  async #own(partition: number, lease: HeldLease): Promise<void> {
    const o: Owned = {
      partition,
      lease,
      leaving: false,
      waiting: new WaitingForChannel(partition, this.log),
      admitting: Promise.resolve(),
      admittingWaiting: false,
      held: new Map(),
    };
    this.#owned.set(partition, o);
    try {
      this.hooks.onAcquired(partition);
      const { stream, inboxSubject } = { stream: this.s.names.stream, inboxSubject: this.s.names.inboxSubject(partition) };
      // Everything up to here may have reached an earlier owner: ask PostgreSQL about it.
      const takeoverSeq = (await this.s.jsm.streams.info(stream)).state.last_seq;
      const name = `p${partition}`;
      // A fresh consumer from the start of the work queue: acked items are gone, so it
      // delivers exactly the unanswered ones in order, none held by the dead owner's acks.
      await this.s.jsm.consumers.delete(stream, name).catch(() => false);
      await this.s.jsm.consumers.add(stream, {
        durable_name: name,
        filter_subject: inboxSubject,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        // Redelivery happens by takeover, never by timeout: a turn may run for minutes.
        ack_wait: 24 * 3_600_000 * 1_000_000,
        max_ack_pending: 10_000,
      });
      const consumer = await this.s.js.consumers.get(stream, name);
      o.messages = await consumer.consume({ max_messages: 256, expires: pullExpiresMs(this.s.config.lease_ttl_ms) });
      this.log.info({ partition, takeoverSeq }, 'partition acquired');
      o.loop = this.#consume(o, takeoverSeq);
      void this.#watchConsumer(o, o.messages);
      // Lost while the consumer was set up (a process starved past the lease's fence): its abort
      // has fired already, and the partition would stay listed here, consumed by nobody.
      if (lease.signal.aborted) void this.#lost(o);
      else lease.signal.addEventListener('abort', () => void this.#lost(o), { once: true });
    } catch (err) {
      this.log.warn({ err, partition }, 'partition could not be consumed; giving it back');
      this.#owned.delete(partition);
      o.messages?.stop();
      await lease.release();
    }
  }

  async #consume(o: Owned, takeoverSeq: number): Promise<void> {
    try {
      for await (const m of o.messages!) {
        if (o.leaving || o.lease.signal.aborted) break;
        if (m.seq > takeoverSeq) backlogIn(o);
        const more = await this.#receive(o, m, takeoverSeq);
        // The last of the backlog (none undelivered after it, or the stream's last at takeover).
        if (m.seq >= takeoverSeq || m.info.pending === 0) backlogIn(o);
        if (!more) break;
      }
    } catch (err) {
      if (!o.leaving && !o.lease.signal.aborted) this.log.error({ err, partition: o.partition }, `partition consumer ended: ${errorMessage(err)}`);
    } finally {
      backlogIn(o);
    }
    this.#consumerGone(o, 'its consumer ended');
  }

  /** One delivered message: acked when a former owner finished it, else admitted. False once the partition is being given up. */
  async #receive(o: Owned, m: JsMsg, takeoverSeq: number): Promise<boolean> {
    this.inbox.ops.natsDeliveries++;
    let item: StreamedItem;
    try {
      item = m.json<StreamedItem>();
    } catch (err) {
      this.log.error({ err, seq: m.seq }, 'unreadable inbox message dropped');
      m.term();
      return true;
    }
    let replyRefs: MessageRef[] = [];
    if (m.seq <= takeoverSeq) {
      const known = await this.inbox.progress(item.message.channelId, item.message.messageId);
      if (known && !isResumable(known.state)) {
        this.inbox.ackFinished(m);
        return true;
      }
      replyRefs = known?.replyRefs ?? [];
    }
    return this.#serially(o, () => this.#admit(o, { m, item, replyRefs }));
  }

  /** Runs `step` after the partition's earlier admissions (the consume loop's and the waiting items'). */
  #serially<T>(o: Owned, step: () => Promise<T>): Promise<T> {
    const run = o.admitting.then(step);
    o.admitting = run.catch(() => {});
    return run;
  }

  /**
   * Hands one received item to the dispatcher, or keeps it waiting when its channel does not
   * run here (see WaitingForChannel). With `claim`, a waiting item whose channel runs here now
   * (WaitingForChannel.admitReady). False once the partition is being given up.
   */
  async #admit(o: Owned, r: Received, claim?: () => boolean): Promise<boolean> {
    const { m, item } = r;
    if (!claim) {
      const known = this.dispatcher.knows(item.message.channelId);
      if (o.waiting.holds(item.message.channelId, known)) {
        o.waiting.add(r, Date.now(), known);
        return true;
      }
    }
    await this.hooks.beforeEnqueue(item.scope, item.message.channelId);
    if (o.leaving || o.lease.signal.aborted) return false;
    // A waiting item a /stop took while its state was read: recorded and acked there (stopOnOwner).
    if (claim && !claim()) return true;
    const queued: InboxItem = { id: m.seq, scope: item.scope, message: item.message, state: 'pending', replyRefs: r.replyRefs };
    this.inbox.track(m.seq, m, item, o.partition, queued);
    rememberCarrier(item.message, carrierOf(m.headers));
    if (o.held && queued.replyRefs.length > 0 && !o.held.has(item.scope)) o.held.set(item.scope, this.dispatcher.hold(item.scope));
    this.dispatcher.enqueue(queued, item.passive);
    return true;
  }

  /** Each balancing step: the waiting items whose channel now runs here (a reload added it) are queued, in order. */
  #admitWaiting(): void {
    for (const o of this.#owned.values()) {
      // While one waits behind an admission held up (the store away), the steps do not pile up.
      if (!o.waiting.size || o.admittingWaiting || o.leaving || o.lease.signal.aborted) continue;
      o.admittingWaiting = true;
      this.#serially(o, () => {
        o.admittingWaiting = false;
        return o.waiting.admitReady(
          (id) => this.dispatcher.knows(id),
          Date.now(),
          (r, claim) => this.#admit(o, r, claim),
        );
      }).catch((err: unknown) => {
        // Not queued: still unacked in the stream, so the partition's next owner runs them.
        this.log.error({ err, partition: o.partition }, 'waiting messages could not be queued');
        this.#consumerGone(o, 'its waiting messages could not be queued');
      });
    }
  }

  /**
   * nats.js does not end a pull consumer's messages when the server deletes the consumer (an
   * operator's `nats consumer rm`): it reports it on the status stream and keeps pulling
   * from nothing. The partition would stay owned and its conversations
   * unanswered while this instance lives, so a consumer the server says is gone hands it back.
   */
  async #watchConsumer(o: Owned, messages: ConsumerMessages): Promise<void> {
    try {
      for await (const s of messages.status()) {
        if (s.type === 'consumer_deleted' || s.type === 'consumer_not_found') {
          this.#consumerGone(o, `its consumer was ${s.type === 'consumer_deleted' ? 'deleted' : 'not found'} on the server`);
          return;
        }
        // nats.js checks the consumer and pulls again by itself; said once per run of misses (its
        // monitor reports every interval after the second, e.g. all through a stream without a
        // leader), because the partition's messages waited meanwhile.
        if (s.type === 'heartbeats_missed' && s.count === 2)
          this.log.warn({ partition: o.partition }, 'partition pull went unanswered (two idle heartbeats missed); nats.js checks the consumer and pulls again');
      }
    } catch {
      // The status stream ends with the messages; the consume loop reports why.
    }
  }

  /**
   * The partition's consumer stopped delivering while the partition is still ours: hand it
   * back, so the balancing takes it again (here or on another instance) with a new consumer,
   * through the takeover path that asks PostgreSQL what was already answered.
   */
  #consumerGone(o: Owned, why: string): void {
    if (o.leaving || o.lease.signal.aborted || this.#stop.signal.aborted) return;
    this.log.warn({ partition: o.partition, why }, 'partition consumer stopped delivering; handing the partition back to take it again');
    this.#leave(o, why).catch((err: unknown) => this.log.error({ err, partition: o.partition }, 'partition hand-back failed'));
  }

  /**
   * The lease was taken from us (we could not renew): stop its turns at once, write nothing
   * more. Also during a hand-back, whose running turns would otherwise go on for the grace
   * period as if the partition were still ours; the hand-back then ends it.
   */
  async #lost(o: Owned): Promise<void> {
    if (o.lease.released) return;
    const handingBack = o.leaving;
    o.leaving = true;
    this.log.warn({ partition: o.partition, handingBack }, 'partition lease lost; its turns stop here');
    o.messages?.stop();
    this.inbox.forget(o.partition, true);
    await this.dispatcher.release((scope) => partitionOf(scope, this.s.config.partitions) === o.partition, 0);
    if (!handingBack) this.#owned.delete(o.partition);
  }

  /** Hands a partition back: no new items, running turns finish, their states are written, then the lease goes. */
  #leave(o: Owned, why: string): Promise<void> {
    o.left ??= this.#handBack(o, why);
    return o.left;
  }

  async #handBack(o: Owned, why: string): Promise<void> {
    if (o.leaving) return;
    o.leaving = true;
    o.messages?.stop();
    try {
      await o.loop;
      await this.dispatcher.release((scope) => partitionOf(scope, this.s.config.partitions) === o.partition, this.graceMs());
      // Its turns ended; a /stop is still answered while their writes settle (what it drops is
      // written and waited for too), and from the moment they did, left to the next owner.
      await this.inbox.settle(o.partition);
      o.settled = true;
      this.inbox.forget(o.partition, false);
    } catch (err) {
      // Its writes did not settle: they are dropped, and the next owner asks PostgreSQL.
      this.inbox.forget(o.partition, true);
      throw err;
    } finally {
      // Given up either way: a partition kept here with nothing consuming it would stall.
      await o.lease.release();
      this.#owned.delete(o.partition);
    }
    this.log.info({ partition: o.partition, why }, 'partition handed back');
  }

  /** At shutdown, after the dispatcher drained: every partition is handed back. */
  async stop(): Promise<void> {
    this.#stop.abort();
    clearTimeout(this.#timer);
    while (this.#balancing) await new Promise((r) => setTimeout(r, 10));
    await Promise.all([...this.#owned.values()].map((o) => this.#leave(o, 'shutting down')));
  }
}
