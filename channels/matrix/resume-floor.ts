import type { Logger } from 'pino';
import { catchUpReachMs } from '../../src/util/cursor-file.js';
import { CATCH_UP_MAX_AGE_MS } from './catch-up.js';
import { isObject } from './normalize.js';

/**
 * The first /sync batch after resuming from a stored position older than the inbox still
 * recognises a message delivered again (or of unknown age): in cluster mode this instance's
 * position may be hours old, and another lease holder answered what came after it. Messages
 * of that batch (its timelines and the gaps read back) sent before `beforeMs` are skipped.
 * Also the first /sync of a listener with no position of its own that may be taking over from
 * an instance killed with messages unread (`takeover`, ChannelContext.listenerMoves): what is
 * newer is answered, what the killed instance stored is dropped by the inbox as a duplicate.
 */
export interface ResumeFloor {
  /** Messages sent before this (origin_server_ts, ms) are not delivered. */
  beforeMs: number;
  /** How far back from now the batch is read: catchUpReachMs of a day and the duplicate window. */
  reachMs: number;
  /** How long ago the position was stored; absent: unknown (a file from before it was kept). */
  positionAgeMs?: number;
  /** Messages skipped so far (at least: a gap's walk stops after a run of ones too old, or at another bound). */
  skipped: number;
  /** A first start with no stored position (takeoverFloor), not a resume. */
  takeover?: true;
}

/**
 * The floor for the first batch after resuming from a position stored at `savedAtMs`, by a
 * listener that began at `startedMs`, or undefined when the position is recent enough to be
 * trusted whole. A time ahead of this
 * clock (the clock was set back) is an unknown age too.
 */
export function resumeFloor(
  savedAtMs: number | undefined,
  duplicateWindowMs: (() => number) | undefined,
  startedMs: number,
  nowMs = Date.now(),
): ResumeFloor | undefined {
  const reachMs = catchUpReachMs(CATCH_UP_MAX_AGE_MS, duplicateWindowMs);
  const positionAgeMs = savedAtMs === undefined ? undefined : nowMs - savedAtMs;
  if (positionAgeMs !== undefined && positionAgeMs >= 0 && positionAgeMs <= reachMs) return undefined;
  // Never past when this listener began (429 retries may take long): nobody else answered what came after.
  return {
    beforeMs: Math.min(startedMs, nowMs - reachMs),
    reachMs,
    ...(positionAgeMs !== undefined && positionAgeMs >= 0 ? { positionAgeMs } : {}),
    skipped: 0,
  };
}

/**
 * The floor for the first /sync of a listener that began at `startedMs` with no stored position,
 * where the listener moves between instances: the first batch is answered back to the duplicate
 * window (less the clock margin), never skipping what was sent after the listener began.
 */
export function takeoverFloor(duplicateWindowMs: (() => number) | undefined, startedMs: number, nowMs = Date.now()): ResumeFloor {
  const reachMs = catchUpReachMs(CATCH_UP_MAX_AGE_MS, duplicateWindowMs);
  return { beforeMs: Math.min(startedMs, nowMs - reachMs), reachMs, skipped: 0, takeover: true };
}

/**
 * Whether a limited timeline of a first /sync (no earlier position to read back to) may have
 * left out messages sent after the floor: only if its oldest event was sent after it too.
 * Otherwise what it left out is older still (the homeserver's order, about the sending order).
 */
export function gapMayBeNewer(events: unknown[] | undefined, floor: ResumeFloor): boolean {
  const oldest = (events ?? []).find(isObject);
  return !(typeof oldest?.origin_server_ts === 'number' && oldest.origin_server_ts < floor.beforeMs);
}

/** Once per resume, after its first batch is stored: how many messages it skipped, and why. */
export function logResumeFloor(floor: ResumeFloor, log: Logger, channel: string): void {
  if (!floor.skipped) return;
  // A takeover skips the room's history, as any first start does: no cause for a warning.
  if (floor.takeover) {
    log.info(
      { channel, skipped: floor.skipped, reachMs: floor.reachMs },
      "Matrix started /sync with no position of its own where the listener moves between instances: its first batch answered the messages of the inbox's duplicate window and skipped the older ones (history)",
    );
    return;
  }
  log.warn(
    { channel, skipped: floor.skipped, reachMs: floor.reachMs, ...(floor.positionAgeMs !== undefined ? { positionAgeMs: floor.positionAgeMs } : {}) },
    "Matrix resumed /sync from a position stored longer ago than the inbox's duplicate window (or a day): the messages of its first batch older than that were skipped, as they may have been answered already",
  );
}
