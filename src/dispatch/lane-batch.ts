import type { InboxItem } from '../inbox/item.js';
import type { ChannelMessage } from '../contracts/message.js';
import type { QueueMode } from '../config/schema.js';

/**
 * A reminder's or a schedule's firing: its own turn in every queue mode. Merged with a user's
 * messages, its hook posted the users' text as the reminder (or the reminder reached the model
 * as plain text), and the turn's sender (the last item's) took the others' words as its own.
 * Nor does it cut or drop a user's answer in `interrupt` mode (Lanes.accept).
 */
export function isFiring(item: InboxItem): boolean {
  return isFiringMessage(item.message);
}

/** Whether `msg` is a reminder's or a schedule's firing (made by the daemon, no user behind it). */
export function isFiringMessage(msg: ChannelMessage): boolean {
  const kind = msg.synthetic?.kind;
  return kind === 'reminder' || kind === 'schedule';
}

/**
 * Whether `item`, in `interrupt` mode, cuts the running turn (of `running`) and drops the
 * queued messages: not an item run before (its reply refs: its batch may be the one running,
 * and it waits for its turn), not a firing, and not over one.
 */
export function interrupts(item: InboxItem, running: readonly InboxItem[]): boolean {
  return item.replyRefs.length === 0 && !isFiring(item) && !running.some(isFiring);
}

/**
 * A lane's next turn's items. Items run before with one reply (a collected turn cut by a crash, a stop
 * or a hand-over) run again as one whatever the mode: one by one, each would overwrite the other's answer.
 * `collect` merges the messages up to the next firing or item run before (each their own turn).
 */
export function takeBatch(lane: { queue: InboxItem[]; mode: QueueMode }): InboxItem[] {
  const head = lane.queue[0]!;
  if (head.replyRefs.length === 0) {
    if (lane.mode !== 'collect' || isFiring(head)) return [lane.queue.shift()!];
    const end = lane.queue.findIndex((it) => isFiring(it) || it.replyRefs.length > 0);
    return lane.queue.splice(0, end === -1 ? lane.queue.length : end);
  }
  const refs = JSON.stringify(head.replyRefs);
  const batch = lane.queue.filter((it) => JSON.stringify(it.replyRefs) === refs);
  lane.queue = lane.queue.filter((it) => !batch.includes(it));
  return batch;
}
