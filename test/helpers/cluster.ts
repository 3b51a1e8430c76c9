import { connect as tcp } from 'node:net';
import { randomBytes } from 'node:crypto';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import pg from 'pg';
import type { Logger } from '../../src/observe/logger.js';
import { createLogger } from '../../src/observe/logger.js';
import { LogSink } from './daemon.js';

export const NATS_URL = process.env.CHANNELD_TEST_NATS_URL ?? 'nats://127.0.0.1:4222';
export const PG_URL = process.env.CHANNELD_TEST_POSTGRES_URL ?? 'postgres://root@127.0.0.1:5432/test';

function reachable(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = tcp({ host, port, timeout: 1000 });
    s.once('connect', () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(false));
    s.once('timeout', () => (s.destroy(), resolve(false)));
  });
}

/**
 * Why the cluster tests cannot run here, or undefined when NATS and PostgreSQL answer.
 * With CHANNELD_REQUIRE_CLUSTER_SERVICES=1 (CI) a missing service fails the run instead.
 */
export async function clusterSkipReason(): Promise<string | undefined> {
  const nats = new URL(NATS_URL);
  const pgu = new URL(PG_URL);
  const missing = [
    ...((await reachable(nats.hostname, Number(nats.port || 4222))) ? [] : [`NATS at ${nats.host}`]),
    ...((await reachable(pgu.hostname, Number(pgu.port || 5432))) ? [] : [`PostgreSQL at ${pgu.host}`]),
  ];
  if (!missing.length) return undefined;
  const reason = `${missing.join(' and ')} not reachable`;
  if (process.env.CHANNELD_REQUIRE_CLUSTER_SERVICES === '1') throw new Error(`cluster tests are required (CHANNELD_REQUIRE_CLUSTER_SERVICES=1) but ${reason}`);
  console.warn(`cluster tests skipped: ${reason}`);
  return reason;
}

/** A namespace (stream, buckets, subjects) and PostgreSQL schema of one test's own. */
export function uniqueNamespace(): string {
  return `t${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
}

/** Runs `fn` on a NATS connection of its own, closed afterwards (what an operator's `nats` CLI would do). */
export async function withNats<T>(fn: (nc: NatsConnection) => Promise<T>): Promise<T> {
  const nc = await connect({ servers: NATS_URL });
  try {
    return await fn(nc);
  } finally {
    await nc.close();
  }
}

/** Deletes the test's stream, KV buckets and schema. */
export async function dropNamespace(ns: string): Promise<void> {
  await withNats(async (nc) => {
    const jsm = await jetstreamManager(nc);
    for (const name of [`${ns}_inbox`, `KV_${ns}_leases`, `KV_${ns}_stops`]) await jsm.streams.delete(name).catch(() => false);
  });
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS ${ns} CASCADE`);
  } finally {
    await client.end();
  }
}

export function quietLogger(): { log: Logger; sink: LogSink } {
  const sink = new LogSink();
  return { log: createLogger({ level: 'debug', destination: sink, pretty: false }), sink };
}

/** The `[cluster]` table of a test config. */
export function clusterToml(ns: string, extra = ''): string {
  return `[cluster]\nnats_url_env = "NATS_URL"\npostgres_url_env = "PG_URL"\nnamespace = "${ns}"\npostgres_schema = "${ns}"\n${extra}\n`;
}

export const clusterEnv = { NATS_URL, PG_URL };
