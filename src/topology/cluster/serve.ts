import { CodedError } from '../../contracts/errors.js';
import { sleep } from '../../util/abortable.js';
import { STOPPED_BY_STOP, type TopologyWork } from '../../contracts/topology.js';
import { agentOf } from '../../config/load.js';
import type { Logger } from '../../observe/logger.js';
import type { ClusterServices } from '../../cluster/connect.js';
import { serveControls } from '../../cluster/controls.js';
import type { ClusterInbox, StopRequest } from '../../cluster/inbox.js';
import type { HeldLease } from '../../cluster/leases.js';
import { partitionOf } from '../../cluster/partition-key.js';
import { stopOnOwner } from '../../cluster/partition-stop.js';
import { Partitions } from '../../cluster/partitions.js';
import { serveRequests } from '../../cluster/requests.js';
import type { ClusterConfigView, ClusterStores } from './stores.js';

export interface ServeDeps {
  s: ClusterServices;
  inbox: ClusterInbox;
  stores: ClusterStores;
  work: TopologyWork;
  log: Logger;
  live: ClusterConfigView;
  startedAt: Date;
}

/**
 * What an instance does for the cluster once its channels can send: its heartbeat (taken
 * again when a stall loses it), its share of the partitions, and the answers to /stop and
 * control requests for the conversations it owns. `stop` undoes it all, in reverse.
 */
export async function serveWork(d: ServeDeps): Promise<{ partitions: Partitions; stop(): Promise<void> }> {
  const { s, work, live } = d;
  const log = d.log.child({ cluster: true });
  const stopping = new AbortController();
  const key = `inst.${s.instanceId}`;
  const startedAt = d.startedAt.toISOString();
  // What this instance tells the others in its heartbeat: its config generation and turns.
  const info = () => {
    const load = work.load();
    return { generation: live.generation, pid: process.pid, in_flight: load.inFlight, queued: load.queued, started_at: startedAt };
  };
  let heartbeat: HeldLease | undefined = await firstHeartbeat(s, key, info, stopping.signal, log);
  if (!heartbeat)
    throw new CodedError(
      'CLUSTER_UNAVAILABLE',
      `instance id "${s.instanceId}" is in use by a running instance; give each instance its own [cluster] instance_id`,
    );
  // A heartbeat lost to a stall (this process starved, NATS away) is taken again, so the
  // instance stays visible and counted; it is released only when serving stops.
  const keep = (held: HeldLease) =>
    held.signal.addEventListener(
      'abort',
      () => {
        if (stopping.signal.aborted) return;
        log.warn({ lease: key }, 'heartbeat lease lost; taking it again');
        void s.leases.acquire(key, stopping.signal, undefined, info).then((again) => {
          if (!again) return;
          heartbeat = again;
          keep(again);
        });
      },
      { once: true },
    );
  keep(heartbeat);
  const inPartition = (p: number) => (scope: string) => partitionOf(scope, s.config.partitions) === p;
  const partitions = new Partitions(s, d.inbox, work, log, () => live.config.daemon.shutdown_grace_ms, {
    onAcquired: (p) => {
      d.stores.sessions.forget(inPartition(p));
      d.stores.conversations.forget(inPartition(p));
    },
    beforeEnqueue: (scope, channelId) => d.stores.conversations.prepare(agentOf(live.config, channelId), scope),
  });
  const stops = serveRequests<StopRequest>(s, s.names.stopWildcard, '/stop', log, (req, msg) => {
    // Answered during a hand-back too, until its running turns ended: a /stop then ends the
    // turn as stopped there, not cut at the grace's end and run again by the next owner.
    const o = partitions.stoppable(req.scope);
    if (!o) return;
    if (req.turn !== undefined) {
      const result = work.stopTurn(req.turn);
      log.info({ scope: req.scope, turn: req.turn, result: result ?? 'nothing' }, 'stop-turn from another instance');
      return void msg.respond(result ?? 'nothing');
    }
    // A request from an older build names no order: it ends everything in the scope, as it did.
    const order = req.order ?? { runningOfAnyone: true };
    const { waiting, released, ...result } = stopOnOwner(o, d.inbox, work, req.scope, order, STOPPED_BY_STOP, log);
    log.info({ scope: req.scope, ...result, waitingDropped: waiting, releasedDropped: released, handingBack: o.leaving }, '/stop from another instance');
    msg.respond(req.order ? JSON.stringify(result) : result.cancelled || result.dropped > 0 ? 'stopped' : 'nothing');
  });
  // A bare /stop in a group: the sender's own work only, whatever the request says.
  const bareStops = serveRequests<StopRequest>(s, s.names.bareStopWildcard, 'bare /stop', log, (req, msg) => {
    const o = partitions.stoppable(req.scope);
    if (!o || typeof req.order?.senderId !== 'string') return;
    const order = { senderId: req.order.senderId, runningOfAnyone: false };
    const { waiting, released, ...result } = stopOnOwner(o, d.inbox, work, req.scope, order, STOPPED_BY_STOP, log);
    if (result.cancelled || result.dropped > 0)
      log.info({ scope: req.scope, ...result, waitingDropped: waiting, releasedDropped: released, handingBack: o.leaving }, 'bare /stop from another instance');
    msg.respond(JSON.stringify(result));
  });
  const controls = serveControls(
    s,
    (scope) => partitions.owns(scope),
    (msg, scope, cmd) => work.runControl(msg, scope, cmd),
    log,
  );
  partitions.start();
  return {
    partitions,
    stop: async () => {
      stopping.abort();
      await partitions.stop();
      controls.unsubscribe();
      stops.unsubscribe();
      bareStops.unsubscribe();
      await heartbeat?.release();
    },
  };
}

/** Tries for the heartbeat at start: a NATS request lost to a busy moment is tried again, not a refused start. */
async function firstHeartbeat(
  s: ClusterServices,
  key: string,
  info: () => Record<string, unknown>,
  signal: AbortSignal,
  log: Logger,
): Promise<HeldLease | undefined> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await s.leases.tryAcquire(key, info);
    } catch (err) {
      if (attempt >= HEARTBEAT_ATTEMPTS) throw err;
      log.warn({ err, lease: key, attempt }, 'heartbeat attempt failed; trying again');
      await sleep(HEARTBEAT_RETRY_MS * attempt, signal);
    }
  }
}
const HEARTBEAT_ATTEMPTS = 3;
const HEARTBEAT_RETRY_MS = 250;
