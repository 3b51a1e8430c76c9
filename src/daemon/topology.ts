import type { DaemonConfig } from '../config/schema.js';
import { LocalTopology } from '../topology/local/local-topology.js';
import { defineComponent, type DaemonComponent } from './services.js';
import { sqliteStoreComponent } from './store.js';

/**
 * One instance on its own (src/topology/local): the SQLite inbox is the intake, controls run
 * here, nothing fences a reply, every listener runs here. A new reply message is sent only
 * while its id can be stored.
 */
export const localTopologyComponent = defineComponent({
  name: 'single-node',
  provides: ['topology'],
  inject: ['config', 'inbox', 'storage', 'logger'],
  start: (ctx) => {
    const config = ctx.use('config');
    const storage = ctx.use('storage');
    const log = ctx.use('logger');
    const whenWritable = (signal: AbortSignal) =>
      storage.whenWritable(signal, () => log.warn({ code: storage.health.code }, 'a reply waits for storage before it sends a new message'));
    const retentionMs = () => config.config.daemon.inbox_retention_hours * 3_600_000;
    ctx.provide('topology', new LocalTopology(ctx.use('inbox'), { whenWritable, retentionMs }));
  },
});

/** What a single-node daemon adds to the core: the SQLite store and the local topology. */
export function singleNodeComponents(): DaemonComponent[] {
  return [sqliteStoreComponent(), localTopologyComponent];
}

/**
 * The one place the mode is chosen: the components that provide the topology and the state
 * stores. Cluster mode's code is loaded only when the config has [cluster].
 */
export async function topologyComponents(config: DaemonConfig): Promise<DaemonComponent[]> {
  if (!config.cluster) return singleNodeComponents();
  const { clusterComponents } = await import('./cluster-topology.js');
  return clusterComponents();
}

/**
 * Loaded once every channel can send replies: the dispatcher takes up what the topology
 * recovers (a crash's unfinished items), and the topology starts serving this instance's
 * share of the work (cluster: heartbeat, partitions, /stop and control requests).
 */
export const topologyWorkComponent = defineComponent({
  name: 'topology-work',
  inject: ['topology', 'dispatcher'],
  start: async (ctx) => {
    const dispatcher = ctx.use('dispatcher');
    dispatcher.recover();
    ctx.effect(await ctx.use('topology').serve(dispatcher));
  },
});
