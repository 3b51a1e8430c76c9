import type { ChannelConfig, DaemonConfig, QueueMode } from '../config/schema.js';

/**
 * The one rule for a conversation's queue mode: its /queue choice, else its channel's
 * `queue_mode`, else `[limits] queue_mode`. The dispatcher queues by it; /queue and /config
 * show its default (no choice) through the workspace.
 */
export function resolveQueueMode(
  chosen: QueueMode | undefined,
  channel: Pick<ChannelConfig, 'queue_mode'> | undefined,
  limits: Pick<DaemonConfig['limits'], 'queue_mode'>,
): QueueMode {
  return chosen ?? channel?.queue_mode ?? limits.queue_mode;
}
