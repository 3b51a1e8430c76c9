import type { ChannelConfig } from '../config/schema.js';
import type { ChannelAdapter } from '../contracts/channel.js';
import type { Dispatcher, ExecuteTurn } from '../dispatch/dispatcher.js';
import { channelOfScope } from '../contracts/message.js';
import { CodedError } from '../contracts/errors.js';
import { agentOf } from '../config/load.js';
import type { DaemonConfig } from '../config/schema.js';
import type { Secrets } from '../config/secrets.js';
import type { Plugin } from '../kernel/plugin.js';
import type { Logger } from '../observe/logger.js';
import { openCluster, type ClusterServices } from './connect.js';
import { ClusterInbox, type StopRequest } from './inbox.js';
import { serveControls } from './controls.js';
import { serveRequests } from './requests.js';
import type { HeldLease } from './leases.js';
import { leasedAdapter, leasedParts } from './listener-lease.js';
import { partitionOf } from './partition-key.js';
import { Partitions } from './partitions.js';
import { PgApprovalStore } from './pg-approvals.js';
import { PgMemoryStore } from './pg-memories.js';
import { PgReminderStore } from './pg-reminders.js';
import { PgConversationStore, PgSessionStore } from './pg-state.js';
import { PgWriter } from './pg-writer.js';
import { PgUsageLedger } from './pg-usage.js';
import { PgReservations } from './pg-reservations.js';
import { startOfUtcDay } from '../store/usage.js';

/** The cluster part of /status (and `channeld status`, /admin). */
export interface ClusterStatus {
  instance: string;
  namespace: string;
  partitions: { total: number; owned: number[] };
  instances: Array<{ id: string; alive: boolean; age_ms: number } & Record<string, unknown>>;
  leases: Array<{ key: string; owner: string; age_ms: number; expired: boolean }>;
  ops: Record<string, number>;
}

/**
 * The services the cluster plugins inject or provide, by the names and (structurally) the
 * types of the daemon's service map (src/daemon/services.ts, which checks that they agree).
 */
export interface ClusterWiring {
  config: { readonly config: DaemonConfig; readonly secrets: Secrets; readonly generation: number };
  logger: Logger;
  shutdown: { readonly signal: AbortSignal };
  dispatcher: Dispatcher;
  status: { readonly startedAt: Date };
  inbox: ClusterInbox;
  sessions: PgSessionStore;
  conversations: PgConversationStore;
  usage: PgUsageLedger;
  'approval-store': PgApprovalStore;
  spend: PgReservations;
  memories: PgMemoryStore;
  reminders: PgReminderStore;
  topology: ClusterComposition;
}
type ClusterPlugin<I extends keyof ClusterWiring, P extends keyof ClusterWiring = never> = Plugin<ClusterWiring, I, P>;

/**
 * Everything cluster mode changes in the composition root, in one place: the store plugin
 * (shared inbox + PostgreSQL state instead of SQLite), the turn wrapper (load state before,
 * its writes go behind), the work plugin (partitions, /stop and control subjects, heartbeat) and the
 * listener gate (leases for polling, gateway and socket listeners).
 */
export class ClusterComposition {
  #s: ClusterServices | undefined;
  #config: ClusterWiring['config'] | undefined;
  #inbox: ClusterInbox | undefined;
  #writer: PgWriter | undefined;
  #sessions: PgSessionStore | undefined;
  #conversations: PgConversationStore | undefined;
  #usage: PgUsageLedger | undefined;
  #partitions: Partitions | undefined;

  get services(): ClusterServices {
    if (!this.#s) throw new CodedError('CLUSTER_UNAVAILABLE', 'the cluster store has not started');
    return this.#s;
  }

  /** Provides inbox, sessions, conversations, usage, approval decisions, spend reservations, memories and reminders from NATS and PostgreSQL, and this object as the topology. */
  storePlugin(): ClusterPlugin<
    'config' | 'logger' | 'shutdown',
    'inbox' | 'sessions' | 'conversations' | 'usage' | 'approval-store' | 'spend' | 'memories' | 'reminders' | 'topology'
  > {
    return {
      name: 'store',
      provides: ['inbox', 'sessions', 'conversations', 'usage', 'approval-store', 'spend', 'memories', 'reminders', 'topology'],
      inject: ['config', 'logger', 'shutdown'],
      startTimeoutMs: 30_000,
      start: async (ctx) => {
        const log = ctx.use('logger').child({ cluster: true });
        const hardStop = ctx.use('shutdown').signal;
        const live = ctx.use('config');
        this.#config = live;
        const cfg = live.config.cluster!;
        const urls = { nats: live.secrets.get('cluster', 'nats_url')!, postgres: live.secrets.get('cluster', 'postgres_url')! };
        const s = await openCluster(cfg, urls, log);
        this.#s = s;
        ctx.effect(() => s.close());
        this.#writer = new PgWriter(s.pool, log, hardStop);
        ctx.effect(() => this.#writer!.flush());
        this.#inbox = new ClusterInbox(s, log, this.#writer);
        this.#sessions = new PgSessionStore(this.#writer);
        this.#conversations = new PgConversationStore(this.#writer);
        this.#usage = new PgUsageLedger(this.#writer);
        ctx.provide('inbox', this.#inbox);
        ctx.provide('sessions', this.#sessions);
        ctx.provide('conversations', this.#conversations);
        ctx.provide('usage', this.#usage);
        ctx.provide('approval-store', new PgApprovalStore(this.#writer));
        ctx.provide('spend', new PgReservations(this.#writer, log));
        ctx.provide('memories', new PgMemoryStore(this.#writer));
        ctx.provide('reminders', new PgReminderStore(this.#writer));
        ctx.provide('topology', this);
        log.info({ instance: s.instanceId, namespace: cfg.namespace }, 'cluster mode: NATS and PostgreSQL connected');
      },
    };
  }

  #agentOf(scope: string): string {
    return agentOf(this.#config!.config, channelOfScope(scope));
  }

  /**
   * Loads the conversation's state before its turn. Its writes go behind: the next turn of the
   * conversation reads them from memory here (this instance owns the partition), and the
   * item's ack waits for their commit (ClusterInbox.setState), so a turn never waits for
   * PostgreSQL after it answered (it did: a commit per turn in a row took 3x the answer).
   */
  wrapExecute(execute: ExecuteTurn): ExecuteTurn {
    return async (job, signal) => {
      const agent = this.#agentOf(job.scope);
      // The budget gate reads the cluster's spending today: learnt here for agents that have one.
      const budgeted = this.#config!.config.agents[agent]?.daily_budget !== undefined;
      await Promise.all([
        this.#sessions!.prepare(agent, job.scope),
        this.#conversations!.prepare(agent, job.scope),
        ...(budgeted ? [this.#usage!.refresh(agent, startOfUtcDay())] : []),
      ]);
      return execute(job, signal);
    };
  }

  /** The operator's stop of a turn this instance does not run: sent to the instance that does. */
  stopTurn(id: string): Promise<'cancelled' | 'dropped' | undefined> {
    return this.#inbox ? this.#inbox.stopTurn(id) : Promise.resolve(undefined);
  }

  /** Aborted when this instance loses the lease of the scope's partition: its reply stops writing. */
  fenceOf(scope: string): AbortSignal | undefined {
    return this.#partitions?.leaseOf(scope);
  }

  /**
   * A listener its kind calls exclusive (polling, gateways, sockets: ChannelDescriptor
   * `exclusiveListener`) runs where its lease is; the others (webhooks, pages) everywhere.
   * One split into `parts` (gateway shards) has a lease per part, `listener.<id>.<part>`.
   */
  gate(config: ChannelConfig, adapter: ChannelAdapter, exclusive: boolean, parts = 1): ChannelAdapter {
    if (!exclusive) return adapter;
    const key = `listener.${config.id}`;
    return parts > 1 && adapter.listenPart ? leasedParts(adapter, key, parts, this.services.leases) : leasedAdapter(adapter, key, this.services.leases);
  }

  /** Partitions, the /stop subject and this instance's heartbeat; needs the dispatcher and the channels. */
  workPlugin(): ClusterPlugin<'dispatcher' | 'logger' | 'config' | 'status' | 'topology'> {
    return {
      name: 'cluster-work',
      // `topology` is this object, filled in by the store plugin: injecting it orders this plugin after that one.
      inject: ['dispatcher', 'logger', 'config', 'status', 'topology'],
      start: async (ctx) => {
        const s = this.services;
        const log = ctx.use('logger').child({ cluster: true });
        const dispatcher = ctx.use('dispatcher');
        const config = ctx.use('config');
        const startedAt = ctx.use('status').startedAt.toISOString();
        const key = `inst.${s.instanceId}`;
        // What this instance tells the others in its heartbeat: its config generation and turns.
        const info = () => {
          const snap = dispatcher.snapshot();
          return { generation: config.generation, pid: process.pid, in_flight: snap.inFlight, queued: snap.queued, started_at: startedAt };
        };
        let heartbeat: HeldLease | undefined = await s.leases.tryAcquire(key, info);
        if (!heartbeat)
          throw new CodedError(
            'CLUSTER_UNAVAILABLE',
            `instance id "${s.instanceId}" is in use by a running instance; give each instance its own [cluster] instance_id`,
          );
        // A heartbeat lost to a stall (this process starved, NATS away) is taken again, so the
        // instance stays visible and counted; it is released only when the plugin stops.
        const keep = (held: HeldLease) =>
          held.signal.addEventListener(
            'abort',
            () => {
              if (ctx.signal.aborted) return;
              log.warn({ lease: key }, 'heartbeat lease lost; taking it again');
              void s.leases.acquire(key, ctx.signal, undefined, info).then((again) => {
                if (!again) return;
                heartbeat = again;
                keep(again);
              });
            },
            { once: true },
          );
        keep(heartbeat);
        ctx.effect(() => heartbeat?.release());
        const inPartition = (p: number) => (scope: string) => partitionOf(scope, s.config.partitions) === p;
        const partitions = new Partitions(s, this.#inbox!, dispatcher, log, () => config.config.daemon.shutdown_grace_ms, {
          onAcquired: (p) => {
            this.#sessions!.forget(inPartition(p));
            this.#conversations!.forget(inPartition(p));
          },
          beforeEnqueue: (scope) => this.#conversations!.prepare(this.#agentOf(scope), scope),
        });
        this.#partitions = partitions;
        const sub = serveRequests<StopRequest>(s, s.names.stopWildcard, '/stop', log, (req, msg) => {
          if (!partitions.owns(req.scope)) return;
          if (req.turn !== undefined) {
            const result = dispatcher.stopTurn(req.turn);
            log.info({ scope: req.scope, turn: req.turn, result: result ?? 'nothing' }, 'stop-turn from another instance');
            return void msg.respond(result ?? 'nothing');
          }
          const stopped = dispatcher.stop(req.scope, 'stopped by /stop');
          log.info({ scope: req.scope, stopped }, '/stop from another instance');
          msg.respond(stopped ? 'stopped' : 'nothing');
        });
        ctx.effect(() => sub.unsubscribe());
        const controls = serveControls(
          s,
          (scope) => partitions.owns(scope),
          (msg, scope, cmd) => dispatcher.runControl(msg, scope, cmd),
          log,
        );
        ctx.effect(() => controls.unsubscribe());
        // Give the heartbeat a moment to be seen, so the first balancing counts this instance.
        partitions.start();
        ctx.effect(() => partitions.stop());
      },
    };
  }

  status(): ClusterStatus | undefined {
    const s = this.#s;
    if (!s) return undefined;
    const rows = s.leases.table();
    return {
      instance: s.instanceId,
      namespace: s.config.namespace,
      partitions: { total: s.config.partitions, owned: this.#partitions?.owned() ?? [] },
      instances: rows.filter((r) => r.key.startsWith('inst.')).map((r) => ({ id: r.owner, alive: !r.expired, age_ms: r.ageMs, ...r.info })),
      leases: rows.filter((r) => !r.key.startsWith('inst.')).map((r) => ({ key: r.key, owner: r.owner, age_ms: r.ageMs, expired: r.expired })),
      ops: {
        ...this.#inbox!.ops,
        natsKvOps: s.leases.kvOps,
        pgStateReads: this.#writer!.counts.reads,
        pgStateWrites: this.#writer!.counts.writes,
        pgStateCommits: this.#writer!.counts.commits,
      },
    };
  }
}
