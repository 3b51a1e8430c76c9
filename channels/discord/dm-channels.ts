import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { MAX_KNOWN_DM_CHANNELS } from './catch-up.js';

/** The file holds at most MAX_KNOWN_DM_CHANNELS snowflakes as JSON: one larger is not read. */
const MAX_FILE_BYTES = 4096;
const SNOWFLAKE = /^\d{1,20}$/;

/**
 * The DM channels messages came from, the newest first, at most MAX_KNOWN_DM_CHANNELS: a
 * catch-up reads them, since Discord lists no bot's DM channels. Kept in a file beside the
 * cursor, so a restart catches up on DMs sent while the daemon was down too. Writes are
 * coalesced (one in flight, the newest list next) and atomic (a temp file of this process +
 * rename: the old and the new process of an upgrade never write into one temp file).
 */
export class KnownDmChannels {
  #ids: string[] = [];
  #loaded = false;
  #pending = false;
  #writing: Promise<void> | undefined;

  /** `path`: none keeps the list in memory only. */
  constructor(
    private readonly path: string | undefined,
    private readonly onError: (err: unknown) => void,
  ) {}

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
    if (!this.path) return;
    this.#pending = true;
    this.#writing ??= this.#drain(this.path);
  }

  /** Resolves once every change is written (or failed). */
  async flushed(): Promise<void> {
    while (this.#writing) await this.#writing;
  }

  async #drain(path: string): Promise<void> {
    try {
      while (this.#pending) {
        this.#pending = false;
        try {
          await mkdir(dirname(path), { recursive: true });
          await writeFile(`${path}.${process.pid}.tmp`, `${JSON.stringify(this.#ids)}\n`);
          await rename(`${path}.${process.pid}.tmp`, path);
        } catch (err) {
          this.onError(err);
        }
      }
    } finally {
      this.#writing = undefined;
    }
  }
}
