import { ChannelError } from '../../src/contracts/errors.js';
import { MAX_ANSWER_BYTES } from './client.js';

/**
 * The /sync filter (client-server spec, "Filtering"), passed inline as JSON, and how it shrinks
 * when an answer does not fit the client's answer bound (client.ts, MAX_ANSWER_BYTES).
 */

/** Events per room in a normal /sync: a batch this size fits the answer bound in the usual case. */
export const FULL_TIMELINE_LIMIT = 50;
/** The least a shrinking /sync asks for: one event per room. */
export const MIN_TIMELINE_LIMIT = 1;

/**
 * The filter for `timelineLimit` events per room. At full size the bot asks for what it always
 * did; smaller (an answer was too large, e.g. a busy account back after a long absence) it also
 * drops what it never reads: room account data, global account data other than m.direct, and
 * every state event but m.room.encryption (members were lazy-loaded already).
 */
export function syncFilter(timelineLimit: number): string {
  if (timelineLimit >= FULL_TIMELINE_LIMIT)
    return JSON.stringify({
      presence: { not_types: ['*'] },
      room: { timeline: { limit: timelineLimit }, ephemeral: { not_types: ['*'] }, state: { lazy_load_members: true } },
    });
  return JSON.stringify({
    presence: { not_types: ['*'] },
    account_data: { types: ['m.direct'] },
    room: {
      timeline: { limit: timelineLimit },
      ephemeral: { not_types: ['*'] },
      state: { lazy_load_members: true, types: ['m.room.encryption'] },
      account_data: { not_types: ['*'] },
    },
  });
}

/**
 * The timeline limit to ask with after an answer too large at `timelineLimit`: half. At the floor
 * nothing smaller can be asked for: a retryable failure, so the supervisor logs it and backs off
 * (never parked, never silent), and asks again at the floor.
 */
export function smallerTimelineLimit(timelineLimit: number, cause: unknown): number {
  if (timelineLimit > MIN_TIMELINE_LIMIT) return Math.max(MIN_TIMELINE_LIMIT, Math.floor(timelineLimit / 2));
  throw new ChannelError(
    'CHANNEL_REQUEST_FAILED',
    `Matrix sync: the answer is larger than ${MAX_ANSWER_BYTES} bytes even at ${timelineLimit} event per room; retrying with backoff (too many rooms or too much state for one answer: leave rooms the bot does not serve)`,
    { cause, retryable: true },
  );
}
