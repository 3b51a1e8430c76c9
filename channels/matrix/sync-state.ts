import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { join } from 'node:path';

/** What the listener keeps across restarts. */
export interface SyncState {
  /** The account the token belongs to: another account starts afresh. */
  userId: string;
  /** The /sync `next_batch` up to which every event is in the inbox. */
  since: string;
  /** Encrypted rooms already told the bot cannot read them (the notice goes once). */
  encryptedNotified: string[];
}

/**
 * The /sync position, in `<state_dir>/matrix/<channel id>.json`: written (temp file,
 * fsync, rename) only after every event of a batch is stored, so a kill -9 at any moment
 * leaves the position before anything not yet stored, and the next start asks for it again.
 */
export class SyncStateFile {
  readonly path: string;

  constructor(stateDir: string, channelId: string) {
    const dir = join(stateDir, 'matrix');
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    this.path = join(dir, `${channelId}.json`);
  }

  /** The stored state for `userId`, or undefined: none yet, another account's, or unreadable. */
  read(userId: string): SyncState | undefined {
    try {
      const s = JSON.parse(readFileSync(this.path, 'utf8')) as Partial<SyncState>;
      if (s.userId !== userId || typeof s.since !== 'string' || !s.since) return undefined;
      return { userId, since: s.since, encryptedNotified: Array.isArray(s.encryptedNotified) ? s.encryptedNotified.filter((r) => typeof r === 'string') : [] };
    } catch {
      return undefined;
    }
  }

  write(state: SyncState): void {
    const tmp = `${this.path}.tmp`;
    const fd = openSync(tmp, 'w', 0o600);
    try {
      writeSync(fd, JSON.stringify(state));
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, this.path);
  }
}
