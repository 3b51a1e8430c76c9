import { ClusterTopology } from '../topology/cluster/cluster-topology.js';
import { defineComponent, type DaemonComponent } from './services.js';
import { sqliteStoreComponent } from './store.js';

/**
 * Cluster mode (src/topology/cluster): the topology over NATS JetStream and PostgreSQL, and
 * the conversations' state stores it shares, as the daemon's services. Its work (partitions,
 * heartbeat, control subjects) starts with `topologyWorkComponent` once channels run.
 */
const clusterTopologyComponent = defineComponent({
  name: 'store',
  provides: ['sessions', 'conversations', 'usage', 'approval-store', 'spend', 'memories', 'minutes', 'reminders', 'topology'],
  inject: ['config', 'logger', 'shutdown'],
  startTimeoutMs: 30_000,
  start: async (ctx) => {
    const log = ctx.use('logger').child({ cluster: true });
    const topology = await ClusterTopology.open(ctx.use('config'), log, ctx.use('shutdown').signal);
    ctx.effect(() => topology.close());
    const { stores } = topology;
    ctx.provide('sessions', stores.sessions);
    ctx.provide('conversations', stores.conversations);
    ctx.provide('usage', stores.usage);
    ctx.provide('approval-store', stores.approvals);
    ctx.provide('spend', stores.spend);
    ctx.provide('memories', stores.memories);
    ctx.provide('minutes', stores.minutes);
    ctx.provide('reminders', stores.reminders);
    ctx.provide('topology', topology);
  },
});

/** The cluster topology with its stores, and the local SQLite database that backs this instance's storage health. */
export function clusterComponents(): DaemonComponent[] {
  return [clusterTopologyComponent, sqliteStoreComponent(true)];
}
