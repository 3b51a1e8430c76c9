import type { ChannelAdapter } from '../../contracts/channel.js';
import type { SharedRecord } from '../../contracts/shared-record.js';
import type { ParsedCommand } from '../../contracts/commands.js';
import { CodedError } from '../../contracts/errors.js';
import type { ChannelMessage, MessageRef } from '../../contracts/message.js';
import type {
  Admission,
  ClusterStatus,
  ControlOutcome,
  ControlRouting,
  InboxItem,
  InboxState,
  Incoming,
  ListenerSpec,
  SharedState,
  StopOrder,
  StopResult,
  Topology,
  TopologyIntake,
  TopologyWork,
} from '../../contracts/topology.js';
import { agentOf } from '../../config/load.js';
import type { Logger } from '../../observe/logger.js';
import { startOfUtcDay } from '../../store/usage-ledger.js';
import { openCluster, type ClusterServices } from '../../cluster/connect.js';
import { ClusterInbox } from '../../cluster/inbox.js';
import { leasedAdapter, leasedParts } from '../../cluster/listener-lease.js';
import { relayedAdapter } from '../../cluster/reply-relay.js';
import { PgApprovalStore } from '../../cluster/pg-approvals.js';
import { PgChannelRecords } from '../../cluster/pg-channel-records.js';
import { PgMinuteStore } from '../../cluster/pg-minutes.js';
import { PgReminderStore } from '../../cluster/pg-reminders.js';
import { PgMemoryStore } from '../../cluster/pg-memories.js';
import { PgReservations } from '../../cluster/pg-reservations.js';
import { PgConversationStore, PgSessionStore } from '../../cluster/pg-state.js';
import { PgUsageLedger } from '../../cluster/pg-usage.js';
import { PgWriter } from '../../cluster/pg-writer.js';
import type { Partitions } from '../../cluster/partitions.js';
import { serveWork } from './serve.js';
import type { ClusterConfigView, ClusterStores } from './stores.js';

export type { ClusterConfigView, ClusterStores };

/** Never aborted: a scope whose partition this instance does not own is not fenced by it. */
const NOT_FENCED: AbortSignal = new AbortController().signal;

/** Well inside the stream's 2-minute duplicate window (src/cluster/connect.ts), so a catch-up at its edge is still recognised. */
const STREAM_DUPLICATE_WINDOW_MS = 90_000;

/** The shared inbox as the intake: a message is published to its partition's subject and runs where that partition is consumed. */
class StreamIntake implements TopologyIntake {
  readonly store = 'jetstream';
  readonly writable = true;

  constructor(private readonly inbox: ClusterInbox) {}

  duplicateWindowMs(): number {
    return STREAM_DUPLICATE_WINDOW_MS;
  }

  async receive({ msg, scope, passive }: Incoming): Promise<Admission> {
    return this.inbox.publish(msg, scope, passive);
  }

  /** One at a time, stopping at the first the stream refuses, so none overtakes another. */
  async receiveBatch(batch: readonly Incoming[]): Promise<Array<PromiseSettledResult<Admission>>> {
    const out: Array<PromiseSettledResult<Admission>> = [];
    for (const h of batch) {
      try {
        out.push({ status: 'fulfilled', value: await this.receive(h) });
      } catch (err) {
        out.push({ status: 'rejected', reason: err });
        break;
      }
    }
    return out;
  }

  setState(id: number, state: InboxState, error?: string): void {
    this.inbox.setState(id, state, error);
  }

  setReplyRefs(id: number, refs: readonly MessageRef[]): void {
    this.inbox.setReplyRefs(id, refs);
  }

  interrupted(id: number): void {
    this.inbox.interrupted(id);
  }
}

/** Controls go to the instance that owns the conversation's partition (src/cluster/controls.ts). */
class RoutedControls implements ControlRouting {
  constructor(private readonly inbox: ClusterInbox) {}

  /** The scope's turn and queue stop where they run (its partition's owner), as `order` says. */
  stop(msg: ChannelMessage, scope: string, order: StopOrder | undefined, _here: (order: StopOrder) => StopResult): Promise<StopResult | 'duplicate'> {
    return this.inbox.stop(msg, scope, order);
  }

  control(msg: ChannelMessage, scope: string, cmd: ParsedCommand, here: () => Promise<string | undefined>): Promise<ControlOutcome> {
    return this.inbox.control(msg, scope, cmd, here);
  }

  /** The sender's turn may run on the partition's owner, another instance. */
  stopBare(msg: ChannelMessage, scope: string): Promise<StopResult | 'duplicate' | undefined> {
    return this.inbox.stopBare(msg, scope);
  }

  /** A turn not running here may run on another instance. */
  async stopTurn(id: string, here: () => 'cancelled' | 'dropped' | undefined): Promise<'cancelled' | 'dropped' | undefined> {
    return here() ?? (await this.inbox.stopTurn(id));
  }
}

/**
 * Cluster mode: NATS JetStream carries the shared inbox, leases and control requests;
 * PostgreSQL the conversations' state (written behind, in one group commit per turn).
 * Built by `open` in order, so every part exists from the start; only the partitions wait
 * for `serve` (they need the dispatcher).
 */
export class ClusterTopology implements Topology {
  readonly intake: StreamIntake;
  readonly controls: RoutedControls;
  readonly state: SharedState;
  readonly stores: ClusterStores;
  readonly #s: ClusterServices;
  readonly #inbox: ClusterInbox;
  readonly #writer: PgWriter;
  readonly #records: PgChannelRecords;
  readonly #live: ClusterConfigView;
  readonly #log: Logger;
  readonly #openedAt = new Date();
  #partitions: Partitions | undefined;

  private constructor(s: ClusterServices, writer: PgWriter, live: ClusterConfigView, log: Logger) {
    this.#s = s;
    this.#writer = writer;
    this.#records = new PgChannelRecords(s.pool, s.config.namespace);
    this.#live = live;
    this.#log = log;
    this.#inbox = new ClusterInbox(s, log, writer);
    this.intake = new StreamIntake(this.#inbox);
    this.controls = new RoutedControls(this.#inbox);
    this.stores = {
      sessions: new PgSessionStore(writer),
      conversations: new PgConversationStore(writer),
      usage: new PgUsageLedger(writer),
      approvals: new PgApprovalStore(writer),
      spend: new PgReservations(writer, log),
      memories: new PgMemoryStore(writer),
      minutes: new PgMinuteStore(writer, s.instanceId),
      reminders: new PgReminderStore(writer),
    };
    this.state = { prepare: (scope, channelId) => this.#prepare(scope, channelId), whenWritable: (signal) => this.#whenWritable(signal) };
  }

  /** Connects to NATS and PostgreSQL (migrating the schema) and builds every part. */
  static async open(live: ClusterConfigView, log: Logger, hardStop: AbortSignal): Promise<ClusterTopology> {
    const cfg = live.config.cluster;
    const nats = live.secrets.get('cluster', 'nats_url');
    const postgres = live.secrets.get('cluster', 'postgres_url');
    if (!cfg || !nats || !postgres) throw new CodedError('CLUSTER_UNAVAILABLE', 'cluster mode needs [cluster] with nats_url and postgres_url');
    const s = await openCluster(cfg, { nats, postgres }, log);
    log.info({ instance: s.instanceId, namespace: cfg.namespace }, 'cluster mode: NATS and PostgreSQL connected');
    return new ClusterTopology(s, new PgWriter(s.pool, log, hardStop, { ledger: 'write_batches' }), live, log);
  }

  /** Flushes the writes behind, then closes the connections. */
  async close(): Promise<void> {
    try {
      await this.#writer.flush();
    } finally {
      await this.#s.close();
    }
  }

  /**
   * Loads the conversation's state before its turn. Its writes go behind: the next turn of the
   * conversation reads them from memory here (this instance owns the partition), and the
   * item's ack waits for their commit (ClusterInbox.setState), so a turn never waits for
   * PostgreSQL after it answered (it did: a commit per turn in a row took 3x the answer).
   */
  async #prepare(scope: string, channelId: string): Promise<void> {
    const config = this.#live.config;
    const agent = agentOf(config, channelId);
    // The budget gate reads the cluster's spending today: learnt here for agents that have one.
    const budgeted = config.agents[agent]?.daily_budget !== undefined;
    await Promise.all([
      this.stores.sessions.prepare(agent, scope),
      this.stores.conversations.prepare(agent, scope),
      ...(budgeted ? [this.stores.usage.refresh(agent, startOfUtcDay())] : []),
    ]);
  }

  /** A new reply message waits while PostgreSQL takes no writes: its id must be there for a takeover. */
  #whenWritable(signal: AbortSignal): Promise<boolean> {
    return this.#writer.whenHealthy(signal, () => this.#log.warn('a reply waits for PostgreSQL before it sends a new message'));
  }

  /** The stream keeps what crashed instances left; the partition consumers hand it in (`serve`). */
  recover(): InboxItem[] {
    return [];
  }

  /** Heartbeat, partitions, the /stop and control subjects (src/topology/cluster/serve.ts). */
  async serve(work: TopologyWork): Promise<() => Promise<void>> {
    const served = await serveWork({
      s: this.#s,
      inbox: this.#inbox,
      stores: this.stores,
      work,
      log: this.#log,
      live: this.#live,
      startedAt: this.#openedAt,
    });
    this.#partitions = served.partitions;
    return async () => {
      await served.stop();
      this.#partitions = undefined;
    };
  }

  /** Aborted when this instance loses the lease of the scope's partition: its reply stops writing. */
  fenceOf(scope: string): AbortSignal {
    return this.#partitions?.leaseOf(scope) ?? NOT_FENCED;
  }

  /**
   * A listener its kind calls exclusive (polling, gateways, sockets) runs where its lease is;
   * the others (webhooks, pages) everywhere. One split into parts (gateway shards) has a
   * lease per part, `listener.<id>.<part>`. A channel whose connections are instance-local
   * (`applyRelayed`) has its reply operations relayed to every instance
   * (src/cluster/reply-relay.ts), for a turn runs where its partition is owned, not where
   * its user is connected.
   */
  gate(listener: ListenerSpec, adapter: ChannelAdapter): ChannelAdapter {
    const relayed = relayedAdapter(adapter, listener.id, this.#s, this.#log);
    if (!listener.exclusive) return relayed;
    const key = `listener.${listener.id}`;
    return listener.parts > 1 && relayed.listenPart ? leasedParts(relayed, key, listener.parts, this.#s.leases) : leasedAdapter(relayed, key, this.#s.leases);
  }

  /**
   * A channel's records in PostgreSQL (src/cluster/pg-channel-records.ts), under this cluster's
   * namespace: every instance that may run the channel's listener reads what another wrote.
   */
  sharedRecords(channelId: string): (name: string) => SharedRecord {
    return (name) => this.#records.record(channelId, name);
  }

  status(): ClusterStatus {
    const s = this.#s;
    const rows = s.leases.table();
    return {
      instance: s.instanceId,
      namespace: s.config.namespace,
      partitions: { total: s.config.partitions, owned: this.#partitions?.owned() ?? [] },
      waiting_for_channel: this.#partitions?.waiting() ?? { total: 0, by_channel: {} },
      instances: rows.filter((r) => r.key.startsWith('inst.')).map((r) => ({ id: r.owner, alive: !r.expired, age_ms: r.ageMs, ...r.info })),
      leases: rows.filter((r) => !r.key.startsWith('inst.')).map((r) => ({ key: r.key, owner: r.owner, age_ms: r.ageMs, expired: r.expired })),
      ops: {
        ...this.#inbox.ops,
        natsKvOps: s.leases.kvOps,
        pgStateReads: this.#writer.counts.reads,
        pgStateWrites: this.#writer.counts.writes,
        pgStateCommits: this.#writer.counts.commits,
      },
    };
  }
}
