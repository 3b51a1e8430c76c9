import { settleWithin } from '../../src/util/abortable.js';
import { directRooms, isObject } from './normalize.js';

/**
 * The account's m.direct (user id → room ids): which rooms are direct chats. A room joined as
 * one is added by writing the whole content back (account data has no partial update), so the
 * writes go one at a time, each built on what the one before left: two joins written at once
 * would each add their room to the same old content, and the later write would drop the other's
 * room for good (after a restart its messages would be neither a direct chat's nor a listed room's).
 */
export class DirectChats {
  readonly #write: (content: Record<string, unknown>, signal: AbortSignal) => Promise<unknown>;
  #content: Record<string, unknown> = {};
  #rooms = new Set<string>();
  /** Settles once the last write begun has ended, whichever way: the next one starts from there. */
  #tail: Promise<void> = Promise.resolve();

  constructor(write: (content: Record<string, unknown>, signal: AbortSignal) => Promise<unknown>) {
    this.#write = write;
  }

  /** The content as the account holds it (read at start, or an m.direct event of /sync). */
  set(content: unknown): void {
    this.#content = isObject(content) ? content : {};
    this.#rooms = directRooms(content);
  }

  has(roomId: string): boolean {
    return this.#rooms.has(roomId);
  }

  /** Records `roomId` as a direct chat with `userId`, after the writes begun before; rejects when the write fails or `signal` aborts. */
  async add(userId: string, roomId: string, signal: AbortSignal): Promise<void> {
    const before = this.#tail;
    let done!: () => void;
    const mine = new Promise<void>((resolve) => (done = resolve));
    // Waits for `before` too: a caller that gives up waiting must not let the next write overtake it.
    this.#tail = before.then(() => mine);
    try {
      await settleWithin(before, Infinity, signal);
      signal.throwIfAborted();
      if (this.#rooms.has(roomId)) return;
      const theirs = Array.isArray(this.#content[userId]) ? (this.#content[userId] as unknown[]) : [];
      const next = { ...this.#content, [userId]: [...theirs, roomId] };
      await this.#write(next, signal);
      this.set(next);
    } finally {
      done();
    }
  }
}
