import type { Logger } from 'pino';
import { CodedError, errorMessage } from '../../src/contracts/errors.js';
import { sleep } from '../../src/util/abortable.js';
import { isAnswerTooLarge, MAX_ANSWER_BYTES } from './client.js';
import { isObject, type MatrixEvent } from './normalize.js';

/**
 * The messages a `limited` /sync timeline left out (client-server spec, "Syncing": a limited
 * timeline has a gap; `GET /rooms/{roomId}/messages` with `dir=b`, `from` the timeline's
 * `prev_batch` and `to` the previous sync's `since` fills it), read back page by page. A first
 * sync has no `since`: its gap is walked with no `to` (optional in the spec), ending by age.
 */

/** Events per /messages page: a page of full-size events (64 KiB each) stays inside the answer bound. */
export const CATCH_UP_PAGE = 100;
/** Missed events read back per room in one /sync batch: past it the oldest are left, with a warning. */
export const CATCH_UP_MAX_EVENTS_PER_ROOM = 1000;
/** Missed events read back over all rooms of one /sync batch (they are held until the batch is stored). */
export const CATCH_UP_MAX_EVENTS_PER_BATCH = 2000;
/** /messages requests per room, shrunk pages and 429 retries included: a server that answers oddly cannot keep a batch forever. */
const CATCH_UP_MAX_REQUESTS_PER_ROOM = 30;
/** What the missed events of one /sync batch may hold (their JSON as the server sent it): they wait in memory until the batch is stored. */
export const CATCH_UP_MAX_BYTES_PER_BATCH = 16 * 1024 * 1024;
/** A 429 asking for a longer wait leaves the room's gap (the sync loop waits for the whole batch). */
const CATCH_UP_MAX_RATE_WAIT_MS = 30_000;
/** As Mattermost's catch-up: a message older than a day is history, not a question. */
export const CATCH_UP_MAX_AGE_MS = 24 * 60 * 60 * 1000;
/**
 * Events too old (before `notBeforeMs`) met in a row after which the walk ends. Age is the
 * sender's origin_server_ts, but the walk goes in the homeserver's order, about the order
 * events reached it, and federation brings events late (a server that was away, a slow link)
 * with their old times: one too-old event can stand in front of messages sent after the floor,
 * so it is skipped, not taken for the end. A message newer than the floor reached the server
 * after the floor; what stands between it and the walk is what reached the server later, so
 * a long run of too-old events with nothing newer among them is, in all likelihood, the time
 * before the floor. So the walk asks for no further page once the last 100 events it met were
 * all too old (two federation transactions' worth: the server-server spec caps one at 50); the
 * run counts across pages, whatever their size, and the page that completes it is read to its
 * end (it is here already). A longer late burst still hides what is behind it: the warning then
 * says how many too-old events at least the walk left.
 */
export const CATCH_UP_TOO_OLD_RUN = 100;

/** Only messages: what the bot answers. A state change in the gap (encryption) comes in the /sync's own `state`. */
const MESSAGES_FILTER = JSON.stringify({ types: ['m.room.message'] });

/** What one /sync batch's catch-ups may read in all: each room's walk takes its part out. */
export function catchUpBudget(): { events: number; bytes: number } {
  return { events: CATCH_UP_MAX_EVENTS_PER_BATCH, bytes: CATCH_UP_MAX_BYTES_PER_BATCH };
}

/** A `GET /rooms/{roomId}/messages` answer: `chunk` newest first (dir=b); `end` absent once nothing more is there. */
export interface MessagesAnswer {
  start?: unknown;
  end?: unknown;
  chunk?: unknown[];
}

/** Reads one page of `GET /rooms/{roomId}/messages?{query}`; rejects with the classified error. */
export type ReadMessages = (query: Record<string, string>, signal: AbortSignal) => Promise<MessagesAnswer>;

export interface CatchUpRoomOptions {
  read: ReadMessages;
  roomId: string;
  /** The limited timeline's `prev_batch`. */
  from: string;
  /**
   * The `since` of the /sync whose answer this is: events up to it were read already. Absent
   * (a first sync, ChannelContext.listenerMoves): the walk ends by `notBeforeMs` (a run of
   * events too old), at the room's start, or at another bound.
   */
  to?: string;
  /** Missed events to read at most (this room's share of what the batch has left). */
  maxEvents: number;
  /** Bytes of missed events to read at most (what the batch has left). */
  maxBytes: number;
  /** Events sent before this time (ms) are not read. */
  notBeforeMs: number;
  channel: string;
  log: Logger;
  signal: AbortSignal;
}

/** Why a walk stopped before the previous batch. */
export type CatchUpBound = 'events' | 'bytes' | 'age' | 'requests' | 'size' | 'refused';

export interface CaughtUp {
  /** The missed events read, oldest first. */
  events: MatrixEvent[];
  /** Set when the walk stopped before reaching the previous batch. */
  bound?: CatchUpBound;
  /** The JSON size of the events read. */
  bytes: number;
  /** How many events at least the walk saw and left, where it saw them. */
  notReadAtLeast?: number;
}

/**
 * Walks one room's gap back from `from` to `to` (none: by age). A page over the answer bound is
 * asked for again at half the size, down to one event, and the rest of the walk keeps the
 * smaller size (the events there are as large). An event sent before `notBeforeMs` is skipped;
 * the walk goes on past it until CATCH_UP_TOO_OLD_RUN of them in a row. The walk stops, with a
 * warning naming the room and how many events it saw and left, at `maxEvents`, after such a run
 * (or at the gap's end, when it skipped any: bound `age`, the count being those skipped), after
 * too many requests, at an event too large alone, or when the homeserver refuses (the channel
 * goes on: the missed messages cannot be read, the rest can). A transient failure rejects: the
 * batch is not stored and is read again, gap and all.
 */
export async function catchUpRoom(o: CatchUpRoomOptions): Promise<CaughtUp> {
  const newestFirst: MatrixEvent[] = [];
  let from = o.from;
  let pageSize = CATCH_UP_PAGE;
  let requests = 0;
  let bytes = 0;
  /** Events skipped as too old: in all, and in a row at the far (oldest) end of what the walk has read. */
  let tooOld = 0;
  let tooOldRun = 0;
  /** `notReadAtLeast` where the walk saw them; unknown otherwise (the sync says only that some are missing). */
  const stop = (bound: CatchUpBound, notReadAtLeast?: number, why?: string): CaughtUp => {
    // With no `to` (a takeover's first sync) the age is how the walk is meant to end: not a warning.
    o.log[bound === 'age' && o.to === undefined ? 'debug' : 'warn'](
      {
        channel: o.channel,
        room: o.roomId,
        bound,
        read: newestFirst.length,
        ...(notReadAtLeast !== undefined ? { notReadAtLeast } : {}),
        maxEvents: o.maxEvents,
        maxAgeMs: CATCH_UP_MAX_AGE_MS,
        ...(why ? { err: why } : {}),
      },
      'Matrix did not read every message a limited /sync left out in a room; the older ones are not answered',
    );
    return { events: newestFirst.reverse(), bound, bytes, ...(notReadAtLeast !== undefined ? { notReadAtLeast } : {}) };
  };
  // The batch's share is spent: this room's gap is not read at all.
  if (o.maxEvents <= 0) return stop('events');
  if (o.maxBytes <= 0) return stop('bytes');
  for (;;) {
    if (requests++ >= CATCH_UP_MAX_REQUESTS_PER_ROOM) return stop('requests');
    let page: MessagesAnswer;
    try {
      page = await o.read({ dir: 'b', from, ...(o.to !== undefined ? { to: o.to } : {}), limit: String(pageSize), filter: MESSAGES_FILTER }, o.signal);
    } catch (err) {
      if (o.signal.aborted) throw err;
      if (isAnswerTooLarge(err)) {
        if (pageSize === 1) return stop('size', 1, `one event's answer is larger than ${MAX_ANSWER_BYTES} bytes`);
        o.log.warn(
          { channel: o.channel, room: o.roomId, limit: pageSize, nextLimit: Math.floor(pageSize / 2), maxAnswerBytes: MAX_ANSWER_BYTES },
          'Matrix /messages answer too large; asking again with fewer events',
        );
        pageSize = Math.floor(pageSize / 2);
        continue;
      }
      if (err instanceof CodedError && err.code === 'CHANNEL_RATE_LIMITED') {
        const waitMs = err.retryAfterMs ?? 1000;
        if (waitMs > CATCH_UP_MAX_RATE_WAIT_MS) return stop('refused', undefined, `rate limited for ${waitMs} ms`);
        await sleep(waitMs, o.signal);
        o.signal.throwIfAborted();
        continue;
      }
      // A refusal for this room (403: history not visible, 400) leaves its gap; a refused token stops the channel.
      if (err instanceof CodedError && !err.retryable && err.code !== 'CHANNEL_AUTH_FAILED') return stop('refused', undefined, errorMessage(err));
      throw err;
    }
    const chunk = (Array.isArray(page.chunk) ? page.chunk : []).filter(isObject) as MatrixEvent[];
    for (let i = 0; i < chunk.length; i++) {
      const e = chunk[i]!;
      // Too old: skipped, but a newer one may still stand behind it (CATCH_UP_TOO_OLD_RUN).
      if (typeof e.origin_server_ts === 'number' && e.origin_server_ts < o.notBeforeMs) {
        tooOld++;
        tooOldRun++;
        continue;
      }
      tooOldRun = 0;
      const size = JSON.stringify(e).length;
      if (bytes + size > o.maxBytes) return stop('bytes', chunk.length - i);
      bytes += size;
      newestFirst.push(e);
    }
    // A page read past the bound tells how many at least are left (the walk asks whole pages).
    if (newestFirst.length > o.maxEvents) {
      const over = newestFirst.length - o.maxEvents;
      newestFirst.length = o.maxEvents;
      return stop('events', over);
    }
    // The spec: no `end`, nothing more (an empty chunk with an `end` may still have more behind it).
    const end = typeof page.end === 'string' && page.end ? page.end : undefined;
    if (!end || tooOldRun >= CATCH_UP_TOO_OLD_RUN) return tooOld ? stop('age', tooOld) : { events: newestFirst.reverse(), bytes };
    from = end;
  }
}
