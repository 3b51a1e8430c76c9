import { hostname } from 'node:os';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, DiscardPolicy, RetentionPolicy, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import pg from 'pg';
import type { ClusterConfig } from '../config/schema.js';
import { CodedError, errorMessage } from '../contracts/errors.js';
import type { Logger } from '../observe/logger.js';
import { Leases } from './leases.js';
import { migrate } from './migrations.js';

/**
 * A query not answered by then has failed (the cluster's own statements take milliseconds;
 * migrations set their own). The timeout is the client's: the server may still run the
 * statement, so the writer drops such a connection and its ledger tells whether the batch ran.
 */
const PG_QUERY_TIMEOUT_MS = 60_000;

/** Names of everything this cluster keeps in NATS, derived from `[cluster] namespace`. */
export function clusterNames(ns: string) {
  return {
    stream: `${ns}_inbox`,
    inboxSubject: (partition: number) => `${ns}.inbox.${partition}`,
    leaseBucket: `${ns}_leases`,
    stopBucket: `${ns}_stops`,
    stopSubject: (token: string) => `${ns}.stop.${token}`,
    stopWildcard: `${ns}.stop.>`,
    /**
     * A bare /stop in a group (src/cluster/inbox.ts stopBare): a subject of its own, which
     * builds before it do not answer, so they never take it for a /stop of everything.
     */
    bareStopSubject: (token: string) => `${ns}.bare-stop.${token}`,
    bareStopWildcard: `${ns}.bare-stop.>`,
    controlSubject: (token: string) => `${ns}.control.${token}`,
    controlWildcard: `${ns}.control.>`,
    /** Reply operations of a channel with instance-local connections, to every instance (src/cluster/reply-relay.ts). */
    relaySubject: (token: string) => `${ns}.relay.${token}`,
  };
}
export type ClusterNames = ReturnType<typeof clusterNames>;

/** The connections one instance holds: NATS (JetStream, KV) and the PostgreSQL pool. */
export interface ClusterServices {
  instanceId: string;
  config: ClusterConfig;
  names: ClusterNames;
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  leases: Leases;
  /** Remembers which /stop messages were acted on, so a redelivered one is not. */
  stops: KV;
  pool: pg.Pool;
  close(): Promise<void>;
}

export function defaultInstanceId(): string {
  return `${hostname().replace(/[^A-Za-z0-9_-]/g, '-')}-${process.pid}`;
}

/** How long a /stop is remembered for de-duplication. */
const STOP_DEDUPE_MS = 10 * 60_000;

/** Connects to NATS and PostgreSQL, creates the stream, buckets and schema if needed. */
export async function openCluster(config: ClusterConfig, urls: { nats: string; postgres: string }, log: Logger): Promise<ClusterServices> {
  const instanceId = config.instance_id ?? defaultInstanceId();
  const names = clusterNames(config.namespace);
  let nc: NatsConnection;
  try {
    nc = await connect({ servers: urls.nats, name: `channeld ${instanceId}`, maxReconnectAttempts: -1, timeout: 5000 });
  } catch (err) {
    throw new CodedError('CLUSTER_UNAVAILABLE', `NATS: ${errorMessage(err)}`, { cause: err });
  }
  // A network that drops packets without a reset would otherwise hold a query (a commit whose
  // answer was lost) for the OS's TCP timeout, a quarter of an hour, with the write-behind
  // stuck and looking healthy. (A connect is bounded by the OS's SYN retries, about 2 minutes;
  // a pool-wide connect timeout would also bound the wait for a free client under load.)
  const pool = new pg.Pool({
    connectionString: urls.postgres,
    max: 8,
    options: `-c search_path=${config.postgres_schema}`,
    query_timeout: PG_QUERY_TIMEOUT_MS,
  });
  pool.on('error', (err) => log.warn({ err }, 'PostgreSQL connection failed; the pool opens another'));
  const closeAll = async () => {
    await nc.drain().catch(() => nc.close());
    await pool.end().catch(() => {});
  };
  try {
    await migrate(pool, config.postgres_schema);
    const jsm = await jetstreamManager(nc);
    const stream = {
      name: names.stream,
      subjects: [`${config.namespace}.inbox.*`],
      // Acknowledged messages leave the stream, so what is in it is exactly the cluster's queue.
      retention: RetentionPolicy.Workqueue,
      max_msgs: config.max_queued,
      discard: DiscardPolicy.New,
      duplicate_window: 2 * 60_000 * 1_000_000,
    };
    try {
      await jsm.streams.info(names.stream);
      await jsm.streams.update(names.stream, { max_msgs: config.max_queued });
    } catch {
      await jsm.streams.add(stream);
    }
    const kvm = new Kvm(nc);
    const kv = await kvm.create(names.leaseBucket, { ttl: config.lease_ttl_ms, history: 1 });
    const stops = await kvm.create(names.stopBucket, { ttl: STOP_DEDUPE_MS, history: 1 });
    const leases = new Leases(kv, instanceId, config.lease_ttl_ms, log);
    await leases.start();
    return {
      instanceId,
      config,
      names,
      nc,
      js: jetstream(nc),
      jsm,
      leases,
      stops,
      pool,
      close: async () => {
        await leases.close();
        await closeAll();
      },
    };
  } catch (err) {
    await closeAll();
    throw err instanceof CodedError ? err : new CodedError('CLUSTER_UNAVAILABLE', errorMessage(err), { cause: err });
  }
}
