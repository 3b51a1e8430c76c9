import { readFile } from 'node:fs/promises';
import { CoalescedFile } from '../../src/util/cursor-file.js';
import { MAX_KNOWN_DM_CHANNELS } from './catch-up.js';

/** The file holds at most MAX_KNOWN_DM_CHANNELS snowflakes as JSON: one larger is not read. */
const MAX_FILE_BYTES = 4096;
const SNOWFLAKE = /^\d{1,20}$/;

/**
 * The DM channels messages came from, the newest first, at most MAX_KNOWN_DM_CHANNELS: a
 * catch-up reads them, since Discord lists no bot's DM channels. Kept in a file beside the
 * cursor (a CoalescedFile), so a restart catches up on DMs sent while the daemon was down too.
 */
export class KnownDmChannels {
  #ids: string[] = [];
  #loaded = false;
  readonly #file: CoalescedFile | undefined;

  /** `path`: none keeps the list in memory only. */
  constructor(
    private readonly path: string | undefined,
    private readonly onError: (err: unknown) => void,
  ) {
    this.#file = path === undefined ? undefined : new CoalescedFile(path);
  }

  /** Reads the stored list once (a missing, unreadable or malformed file is an empty one); ones seen before stay first. */
  async load(): Promise<void> {
    if (this.#loaded || !this.path) return;
    this.#loaded = true;
    let stored: unknown;
    try {
      const text = await readFile(this.path, 'utf8');
      if (text.length > MAX_FILE_BYTES) return;
      stored = JSON.parse(text);
    } catch {
      return;
    }
    if (!Array.isArray(stored)) return;
    const ids = stored.filter((id): id is string => typeof id === 'string' && SNOWFLAKE.test(id));
    this.#ids = [...new Set([...this.#ids, ...ids])].slice(0, MAX_KNOWN_DM_CHANNELS);
  }

  get ids(): readonly string[] {
    return this.#ids;
  }

  /** A message came from DM channel `id`: it goes first (stored soon when the list changed). */
  seen(id: string): void {
    if (this.#ids[0] === id || !SNOWFLAKE.test(id)) return;
    this.#ids = [id, ...this.#ids.filter((x) => x !== id)].slice(0, MAX_KNOWN_DM_CHANNELS);
    this.#file?.save(`${JSON.stringify(this.#ids)}\n`, this.onError);
  }

  /** Resolves once every change is written (or failed). */
  async flushed(): Promise<void> {
    await this.#file?.flushed();
  }
}
