import type { InboxItem } from '../inbox/item.js';
import type { QueueMode } from '../config/schema.js';

/**
 * A lane's next turn's items. Items run before with one reply (a collected turn cut by a crash, a stop
 * or a hand-over) run again as one whatever the mode: one by one, each would overwrite the other's answer.
 */
export function takeBatch(lane: { queue: InboxItem[]; mode: QueueMode }): InboxItem[] {
  const head = lane.queue[0]!;
  if (head.replyRefs.length === 0) return lane.mode === 'collect' ? lane.queue.splice(0) : [lane.queue.shift()!];
  const refs = JSON.stringify(head.replyRefs);
  const batch = lane.queue.filter((it) => JSON.stringify(it.replyRefs) === refs);
  lane.queue = lane.queue.filter((it) => !batch.includes(it));
  return batch;
}
