import type { Logger } from 'pino';
import { ChannelError } from '../../src/contracts/errors.js';
import { platformCaller } from '../../src/util/platform-call.js';
import { classifyMatrixError, isAnswerTooLarge, MAX_ANSWER_BYTES, type MatrixClient } from './client.js';
import type { SyncResponse } from './normalize.js';
import { FULL_TIMELINE_LIMIT, smallerTimelineLimit, syncFilter } from './sync-filter.js';

const API = '/_matrix/client/v3';

/** The listener's /sync requests, and how many events per room they ask for. */
export class SyncCaller {
  readonly #client: MatrixClient;
  readonly #o: { id: string; log: Logger };
  /** /sync holds the request open up to its own timeout: it gets that plus a margin. */
  readonly #call: ReturnType<typeof platformCaller>;
  /** Events per room the next /sync asks for: smaller after an answer too large, until a batch is stored. */
  #timelineLimit = FULL_TIMELINE_LIMIT;

  constructor(client: MatrixClient, o: { id: string; log: Logger; syncTimeoutMs?: number }) {
    this.#client = client;
    this.#o = o;
    this.#call = platformCaller(classifyMatrixError, (o.syncTimeoutMs ?? 30_000) + 15_000);
  }

  /**
   * One /sync. An answer over the client's bound is asked for again with half the events per room (and only the state
   * the bot reads), down to one; past that the failure is retryable: the supervisor logs it and backs off, and the
   * retry starts at the size that last failed.
   */
  async sync(since: string | undefined, timeoutMs: number, signal: AbortSignal): Promise<SyncResponse> {
    let res: SyncResponse;
    for (;;) {
      const filter = syncFilter(this.#timelineLimit);
      try {
        res = await this.#call('sync', signal, (s) =>
          this.#client.request<SyncResponse>('GET', `${API}/sync`, { signal: s, query: { since, timeout: String(timeoutMs), filter } }),
        );
        break;
      } catch (err) {
        if (signal.aborted || !isAnswerTooLarge(err)) throw err;
        const smaller = smallerTimelineLimit(this.#timelineLimit, err);
        this.#o.log.warn(
          { channel: this.#o.id, timelineLimit: this.#timelineLimit, nextTimelineLimit: smaller, maxAnswerBytes: MAX_ANSWER_BYTES },
          'Matrix /sync answer too large; asking again with fewer events per room',
        );
        this.#timelineLimit = smaller;
      }
    }
    if (typeof res.next_batch !== 'string' || !res.next_batch) throw new ChannelError('CHANNEL_UNAVAILABLE', 'Matrix sync: the answer has no next_batch');
    return res;
  }

  /** A batch at a reduced size is stored: the position moved past the backlog, so the next /sync asks for the full size again. */
  fullSize(): void {
    if (this.#timelineLimit === FULL_TIMELINE_LIMIT) return;
    this.#o.log.info({ channel: this.#o.id, timelineLimit: FULL_TIMELINE_LIMIT }, 'Matrix /sync caught up; back to the full size');
    this.#timelineLimit = FULL_TIMELINE_LIMIT;
  }
}
