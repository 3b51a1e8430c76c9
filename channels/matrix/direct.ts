import { settleWithin } from '../../src/util/abortable.js';
import { directRooms, isObject } from './normalize.js';

/** Reads the account's m.direct as the server holds it now (empty when it has none), before each write. */
export interface DirectChatsReader {
  read(signal: AbortSignal): Promise<unknown>;
  /** The read failed (not aborted): the write goes on from the content known here, which this should log. */
  readFailed(roomId: string, err: unknown): void;
}

/**
 * The account's m.direct (user id → room ids): which rooms are direct chats. A room joined as
 * one is added by writing the whole content back (account data has no partial update), so the
 * writes go one at a time, each built on the server's copy read just before it: two joins written
 * at once would each add their room to the same old content, and the later write would drop the
 * other's room for good (after a restart its messages would be neither a direct chat's nor a
 * listed room's). The content /sync hands over may be older than a write of this process (an
 * answer built before the write, handled after it), so it neither feeds a write nor, until a
 * /sync shows a room written here, takes that room out of `has`.
 */
export class DirectChats {
  readonly #write: (content: Record<string, unknown>, signal: AbortSignal) => Promise<unknown>;
  readonly #reader: DirectChatsReader;
  #content: Record<string, unknown> = {};
  #rooms = new Set<string>();
  /**
   * Rooms this process recorded (room id → user id) that no /sync m.direct has shown yet. Bounded by
   * the direct chats this process joined; each goes once a /sync shows it, as every later answer is built after it.
   */
  readonly #unseen = new Map<string, string>();
  /** Settles once the last write begun has ended, whichever way: the next one starts from there. */
  #tail: Promise<void> = Promise.resolve();

  constructor(write: (content: Record<string, unknown>, signal: AbortSignal) => Promise<unknown>, reader: DirectChatsReader) {
    this.#write = write;
    this.#reader = reader;
  }

  /** The content as the account held it (read at start, or an m.direct event of /sync). */
  set(content: unknown): void {
    this.#take(content);
    for (const roomId of this.#unseen.keys()) if (this.#rooms.has(roomId)) this.#unseen.delete(roomId);
  }

  has(roomId: string): boolean {
    return this.#rooms.has(roomId) || this.#unseen.has(roomId);
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
      if (this.has(roomId)) return;
      const base = this.#withUnseen(await this.#current(roomId, signal));
      if (!directRooms(base).has(roomId)) {
        const theirs = Array.isArray(base[userId]) ? (base[userId] as unknown[]) : [];
        base[userId] = [...theirs, roomId];
        await this.#write(base, signal);
      }
      // Shown by a /sync answer handled while the write was under way: every later answer is built after it.
      const shown = this.#rooms.has(roomId);
      this.#take(base);
      if (!shown) this.#unseen.set(roomId, userId);
    } finally {
      done();
    }
  }

  #take(content: unknown): void {
    this.#content = isObject(content) ? content : {};
    this.#rooms = directRooms(content);
  }

  /**
   * The server's copy: the writes of this process are over, so it holds each of them (and another
   * client's changes). Unreadable, the content known here, rather than the room left out.
   */
  async #current(roomId: string, signal: AbortSignal): Promise<unknown> {
    try {
      return await this.#reader.read(signal);
    } catch (err) {
      if (signal.aborted) throw err;
      this.#reader.readFailed(roomId, err);
      return this.#content;
    }
  }

  /** A copy of `content` with the rooms written here and not yet shown by /sync: a read served from a copy behind the write still keeps them. */
  #withUnseen(content: unknown): Record<string, unknown> {
    const out: Record<string, unknown> = isObject(content) ? { ...content } : {};
    const present = directRooms(out);
    for (const [roomId, userId] of this.#unseen) {
      if (present.has(roomId)) continue;
      const theirs = Array.isArray(out[userId]) ? (out[userId] as unknown[]) : [];
      out[userId] = [...theirs, roomId];
    }
    return out;
  }
}
