import type { StopOrder, StopResult, TopologyWork } from '../contracts/topology.js';
import type { Logger } from '../observe/logger.js';
import type { ClusterInbox } from './inbox.js';
import type { WaitingForChannel } from './waiting-channels.js';

/** What a chat /stop reaches of a partition this instance owns (Partitions.stoppable). */
export interface StoppablePartition {
  readonly partition: number;
  /** Being handed back: its lanes released their queued items, its running turns have the grace. */
  readonly leaving: boolean;
  /** Its items waiting for a channel this instance does not run yet. */
  readonly waiting: WaitingForChannel;
}

/** What a chat /stop ended on the partition's owner, and where the dropped messages were. */
export interface OwnerStop extends StopResult {
  /** Of `dropped`: messages waiting for their channel (a rolling reload). */
  waiting: number;
  /** Of `dropped`: queued messages a hand-back had released from the lanes. */
  released: number;
}

/**
 * A chat /stop on the owner of the scope's partition ends what `order` names, as on one node:
 * the running turn and the queued messages in the lanes (work.stop), and the conversation's
 * messages the lanes do not hold but this instance still answers for, which go as its queued
 * ones do (recorded `failed` with `reason`, then acked): those waiting for their channel, so
 * the reload that adds it does not answer what the user stopped, and, while the partition is
 * handed back, those its lanes released, so the next owner does not.
 */
export function stopOnOwner(
  o: StoppablePartition,
  inbox: ClusterInbox,
  work: TopologyWork,
  scope: string,
  order: StopOrder,
  reason: string,
  log: Logger,
): OwnerStop {
  const gone = o.waiting.takeScope(scope, order.senderId);
  for (const { m, item } of gone) {
    inbox.track(m.seq, m, item, o.partition);
    inbox.setState(m.seq, 'failed', reason);
  }
  if (gone.length) log.info({ partition: o.partition, scope, dropped: gone.length }, 'messages waiting for their channel were dropped: /stop');
  const r = work.stop(scope, order, reason);
  const released = o.leaving ? inbox.dropReleased(o.partition, scope, order.senderId, reason) : 0;
  if (released) log.info({ partition: o.partition, scope, dropped: released }, 'messages released by a hand-back were dropped: /stop');
  return { cancelled: r.cancelled, dropped: r.dropped + gone.length + released, waiting: gone.length, released };
}
