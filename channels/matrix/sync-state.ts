import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { MAX_RETRYING, type PendingJoin } from './invites.js';
import { isObject } from './normalize.js';

/** What the listener keeps across restarts. */
export interface SyncState {
  /** The account the token belongs to: another account starts afresh. */
  userId: string;
  /** The /sync `next_batch` up to which every event is in the inbox. */
  since: string;
  /** Encrypted rooms already told the bot cannot read them (the notice goes once). */
  encryptedNotified: string[];
  /**
   * Joins of invited rooms still owed (invites.ts) when it was stored: /sync lists an invite
   * once, before this position, so a restart takes them up from here. At most MAX_RETRYING.
   */
  pendingJoins?: PendingJoin[];
  /**
   * When `since` was stored (this machine's clock, ms), set by the listener as it moves the
   * position (a write of the joins owed alone keeps it); absent in a file from before it was
   * kept: an unknown age. In cluster mode another instance may have answered what came after an
   * old position (resume-floor.ts).
   */
  savedAtMs?: number;
}

/**
 * The stored joins owed that are well formed, at most MAX_RETRYING. One whose budget is spent is
 * kept: the listener (invites.ts `resume`) logs that it gives up on it, rather than it going silently.
 */
function pendingJoinsOf(v: unknown): PendingJoin[] {
  const out: PendingJoin[] = [];
  for (const j of Array.isArray(v) ? v : []) {
    if (out.length >= MAX_RETRYING) break;
    if (!isObject(j) || typeof j.roomId !== 'string' || typeof j.inviter !== 'string' || typeof j.direct !== 'boolean') continue;
    if (!Number.isInteger(j.attempts) || (j.attempts as number) < 1) continue;
    const due = typeof j.nextAttemptAtMs === 'number' && Number.isFinite(j.nextAttemptAtMs) ? { nextAttemptAtMs: j.nextAttemptAtMs } : {};
    out.push({ roomId: j.roomId, inviter: j.inviter, direct: j.direct, attempts: j.attempts as number, ...due });
  }
  return out;
}

/**
 * The /sync position, in `<state_dir>/matrix/<channel id>.json`: written (temp file,
 * fsync, rename) only after every event of a batch is stored, so a kill -9 at any moment
 * leaves the position before anything not yet stored, and the next start asks for it again.
 * The joins owed go in the same file, so the position never moves past an invite whose join is forgotten.
 */
export class SyncStateFile {
  readonly path: string;
  /** The joins owed at the moment of each write; absent, the state's own list is written. */
  readonly #owed: (() => PendingJoin[]) | undefined;

  constructor(stateDir: string, channelId: string, owed?: () => PendingJoin[]) {
    const dir = join(stateDir, 'matrix');
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    this.path = join(dir, `${channelId}.json`);
    this.#owed = owed;
  }

  /** The stored state for `userId`, or undefined: none yet, another account's, or unreadable. */
  read(userId: string): SyncState | undefined {
    try {
      const s = JSON.parse(readFileSync(this.path, 'utf8')) as Partial<SyncState>;
      if (s.userId !== userId || typeof s.since !== 'string' || !s.since) return undefined;
      return {
        userId,
        since: s.since,
        encryptedNotified: Array.isArray(s.encryptedNotified) ? s.encryptedNotified.filter((r) => typeof r === 'string') : [],
        pendingJoins: pendingJoinsOf(s.pendingJoins),
        ...(typeof s.savedAtMs === 'number' && Number.isFinite(s.savedAtMs) ? { savedAtMs: s.savedAtMs } : {}),
      };
    } catch {
      return undefined;
    }
  }

  write(state: SyncState): void {
    const tmp = `${this.path}.tmp`;
    const fd = openSync(tmp, 'w', 0o600);
    try {
      writeSync(fd, JSON.stringify({ ...state, pendingJoins: this.#owed?.() ?? state.pendingJoins ?? [] }));
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, this.path);
  }
}
