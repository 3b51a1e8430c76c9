import { CodedError } from '../contracts/errors.js';
import { sleep } from '../util/abortable.js';
import { type Db, INTEGER_PARAM, TEXT_PARAM } from './db.js';
import type { GroupCommit } from './group-commit.js';
import { ThisTurnReads } from './next-turn.js';
import { isStorageFault } from './health.js';

import type { TurnEndingKind } from '../contracts/agent-events.js';

export type { TurnEndingKind };

/** One finished turn as kept in a session. */
export interface StoredTurn {
  userText: string;
  assistantText: string;
  reasoning: string;
  toolCalls: unknown[];
  ending: TurnEndingKind;
  model: string | null;
  createdAt: number;
  /**
   * The inbox items the turn answered, as the runtime's session hooks write them (`turnOrigin`
   * in src/runtime/builtin-hooks.ts), so a re-run of them finds it; null (or absent) for a turn
   * stored without one (rows from before origins were kept).
   */
  origin?: string | null;
  /** The row's id in the store, on turns read back from it: what `append` replaces. */
  rowId?: number;
}

export interface SessionInfo {
  id: number;
  createdAt: number;
  lastActiveAt: number;
  turns: number;
}

export type SessionSummaryRow = { scope: string; sessions: number; lastActiveAt: number };

/**
 * The session store contract, kept by SQLite here and by PostgreSQL in cluster mode
 * (src/cluster/pg-state.ts); test/store/contract.ts runs the same tests against both.
 * Reads and writes are synchronous for the runtime's hooks: the PostgreSQL store serves
 * them from what it loaded before the turn and writes behind.
 */
export interface Sessions {
  /** Creates the session when the scope has none; may reject STORAGE_UNAVAILABLE, as `start`. */
  active(agent: string, scope: string): SessionInfo;
  /** The scope's active session, or undefined when it has none: never creates one (nor writes). */
  find(agent: string, scope: string): SessionInfo | undefined;
  /**
   * Throws STORAGE_UNAVAILABLE (retryable) when the store refuses a write it needs at once
   * (another process's lock, a full disk): SQLite's a claim of session ids (once every
   * SESSION_ID_BLOCK new sessions; the row itself rides the group commit), PostgreSQL's none.
   * `whenWritable` tells when to try again.
   */
  start(agent: string, scope: string): SessionInfo;
  /** Resolves true once the store takes writes again; false when `signal` aborts first. */
  whenWritable?(signal: AbortSignal): Promise<boolean>;
  /**
   * Adds a finished turn. `replaces`: the row of an earlier, broken-off run of the same items
   * (what `earlierRun` found, as session_find decided), deleted so that a message keeps one row.
   */
  append(sessionId: number, turn: Omit<StoredTurn, 'createdAt' | 'rowId'>, replaces?: StoredTurn): void;
  recent(sessionId: number, limit?: number): StoredTurn[];
  /**
   * What an earlier run of this turn's items stored in the session: the session's newest turn
   * as this store first read it from the database, when `related` says its origin names one of
   * them and no turn was appended here since. An item runs again (after a crash, a stop during
   * its reply, a takeover) before any later turn of its conversation, so the row of its first
   * run, if stored, was the newest one an earlier process or instance left. Answered from
   * memory except when `related` holds: no read per turn.
   */
  earlierRun(sessionId: number, related: (origin: string) => boolean): StoredTurn | undefined;
  summary(agent: string, scopePrefix: string): SessionSummaryRow[] | Promise<SessionSummaryRow[]>;
}

/**
 * How many session ids one claim takes (see SessionStore's `#takeId`). A claim is one
 * synchronous write; each new session after it is one write in the group commit.
 */
export const SESSION_ID_BLOCK = 1000;
/** The scope of the row that marks the top of a claimed block of ids (its agent is ''). */
const BLOCK_SCOPE = '\u0000session id block';

/**
 * Sessions per (agent, conversation scope). `/new` starts a new one; old ones are kept.
 * The newest session of a scope is the active one.
 *
 * With a group commit, a new session's row rides it instead of costing a commit of its own
 * on the turn's start (the first message of every new conversation). Its id must be known
 * at once, so ids come from blocks: a claim writes a marker row at MAX(id) + SESSION_ID_BLOCK
 * and the ids below it are this store's. Another process on the same file (the old one
 * during `channeld upgrade`, which may be an older build inserting with SQLite's own
 * MAX(rowid) + 1) always gets ids above every marker, so no two processes take one id.
 */
export class SessionStore implements Sessions {
  readonly #active;
  readonly #create;
  readonly #createWithId;
  readonly #claim;
  /** The ids this store may hand out: [#nextId, #endId). */
  #nextId = 0;
  #endId = 0;
  /** Sessions whose row still waits in the group commit, by cache key: they stay cached until it committed. */
  readonly #unstored = new Map<string, SessionInfo>();
  readonly #touch;
  readonly #addTurn;
  readonly #turns;
  readonly #count;
  readonly #summary;
  readonly #group: GroupCommit | undefined;
  /** Active session per (agent, scope), so a turn does not look it up twice. */
  readonly #activeCache = new Map<string, SessionInfo>();
  /** The same cached entries by session id, so `append` finds its entry without a scan of them all. */
  readonly #bySession = new Map<number, SessionInfo>();
  /** What `warm` read (null: no session), by cache key, until the event loop's next turn. */
  readonly #warmed = new ThisTurnReads<Loaded | null>();
  /**
   * Per cached session read from the database with turns: its newest turn's origin then
   * (`earlierRun`), until a turn is appended. Bounded with the cache it belongs to.
   */
  readonly #newestRead = new Map<number, string>();
  readonly #byOrigin;
  readonly #replace;

  constructor(db: Db, group?: GroupCommit) {
    this.#group = group;
    this.#active = db.prepare(
      `SELECT id, created_at, last_active_at FROM sessions WHERE agent = ${TEXT_PARAM} AND scope = ${TEXT_PARAM} ORDER BY id DESC LIMIT 1`,
    );
    this.#create = db.prepare(`INSERT INTO sessions (agent, scope, created_at, last_active_at) VALUES (?, ?, ?, ?) RETURNING id`);
    this.#createWithId = db.prepare(`INSERT INTO sessions (id, agent, scope, created_at, last_active_at) VALUES (?, ?, ?, ?, ?)`);
    // One statement, so MAX(id) is read under the write lock that inserts the marker.
    this.#claim = db.prepare(
      `INSERT INTO sessions (id, agent, scope, created_at, last_active_at) SELECT COALESCE(MAX(id), 0) + ${SESSION_ID_BLOCK}, '', ?, ?, ? FROM sessions RETURNING id`,
    );
    this.#touch = db.prepare(`UPDATE sessions SET last_active_at = ? WHERE id = ?`);
    this.#addTurn = db.prepare(
      `INSERT INTO turns (session_id, user_text, assistant_text, reasoning, tool_calls, ending, model, created_at, origin) VALUES (@sessionId, @userText, @assistantText, @reasoning, @toolCalls, @ending, @model, @createdAt, @origin)`,
    );
    this.#turns = db.prepare(`SELECT ${TURN_COLUMNS} FROM turns WHERE session_id = ${INTEGER_PARAM} ORDER BY id DESC LIMIT ${INTEGER_PARAM}`);
    // The newest turn's origin rides the count: a session read from the database costs no extra statement.
    this.#count = db.prepare(
      `SELECT COUNT(*) AS n, (SELECT origin FROM turns WHERE session_id = ${INTEGER_PARAM} ORDER BY id DESC LIMIT 1) AS origin FROM turns WHERE session_id = ${INTEGER_PARAM}`,
    );
    this.#byOrigin = db.prepare(`SELECT ${TURN_COLUMNS} FROM turns WHERE session_id = ${INTEGER_PARAM} AND origin = ${TEXT_PARAM} ORDER BY id DESC LIMIT 1`);
    this.#replace = db.prepare(`DELETE FROM turns WHERE session_id = ? AND id = ?`);
    this.#summary = db.prepare(
      `SELECT scope, COUNT(*) AS sessions, MAX(last_active_at) AS last_active_at FROM sessions WHERE agent = ? AND scope LIKE ? ESCAPE '\\' GROUP BY scope ORDER BY last_active_at DESC`,
    );
  }

  /** The active session of a scope, created on first use. */
  active(agent: string, scope: string): SessionInfo {
    return this.find(agent, scope) ?? this.start(agent, scope);
  }

  find(agent: string, scope: string): SessionInfo | undefined {
    const key = cacheKey(agent, scope);
    const cached = this.#activeCache.get(key);
    if (cached) return { ...cached };
    const warmed = this.#warmed.take(key);
    const read = warmed === undefined ? this.#read(agent, scope) : warmed;
    if (!read) {
      // Kept for the rest of this turn of the event loop: the `active` that creates it reads no more.
      this.#warmed.put(key, null);
      return undefined;
    }
    this.#remember(agent, scope, read.info, read.newest);
    return { ...read.info };
  }

  #read(agent: string, scope: string): Loaded | undefined {
    const row = this.#active.get(agent, scope) as { id: number; created_at: number; last_active_at: number } | undefined;
    if (!row) return undefined;
    const { n, origin } = this.#count.get(row.id, row.id) as { n: number; origin: string | null };
    return { info: { id: row.id, createdAt: row.created_at, lastActiveAt: row.last_active_at, turns: n }, newest: origin };
  }

  /**
   * Reads the active sessions of these scopes now (see `Inbox.readAlongside`), for the turns
   * that start in the microtasks right after: what it found (a session, or none) is used by
   * `active` in place of its own read only until the event loop's next turn. A turn that
   * starts later reads again, since by then another process on the same file (the old one
   * during `channeld upgrade`, whose turns run while this one holds its own back) may have
   * started the session, added turns to it, or begun a new one.
   */
  warm(keys: Iterable<readonly [agent: string, scope: string]>): void {
    for (const [agent, scope] of keys) {
      const key = cacheKey(agent, scope);
      if (!this.#activeCache.has(key)) this.#warmed.put(key, this.#read(agent, scope) ?? null);
    }
  }

  #remember(agent: string, scope: string, info: SessionInfo, newest: string | null = null): void {
    const key = cacheKey(agent, scope);
    if (this.#activeCache.size > 10_000) {
      this.#activeCache.clear();
      this.#bySession.clear();
      this.#newestRead.clear();
      // Not in the database yet: a lookup there would miss them and start a second session.
      for (const [k, unstored] of this.#unstored) {
        this.#activeCache.set(k, unstored);
        this.#bySession.set(unstored.id, unstored);
      }
    }
    const before = this.#activeCache.get(key);
    if (before) {
      this.#bySession.delete(before.id);
      this.#newestRead.delete(before.id);
    }
    this.#activeCache.set(key, info);
    this.#bySession.set(info.id, info);
    if (newest !== null) this.#newestRead.set(info.id, newest);
  }

  /** Starts a fresh session for a scope; earlier ones stay stored. */
  start(agent: string, scope: string): SessionInfo {
    // What `warm` read is older than this session.
    this.#warmed.forget(cacheKey(agent, scope));
    const now = Date.now();
    const group = this.#group;
    const id = group ? this.#takeId(now) : this.#write(() => (this.#create.get(agent, scope, now, now) as { id: number }).id);
    const info = { id, createdAt: now, lastActiveAt: now, turns: 0 };
    this.#remember(agent, scope, info);
    if (group) {
      const key = cacheKey(agent, scope);
      this.#unstored.set(key, info);
      group.add(
        () => this.#createWithId.run(id, agent, scope, now, now),
        () => {
          if (this.#unstored.get(key) === info) this.#unstored.delete(key);
        },
      );
    }
    return { ...info };
  }

  /** The next id of this store's block, claiming a new block (one synchronous write) when it is used up. */
  #takeId(now: number): number {
    if (this.#nextId >= this.#endId) {
      const top = this.#write(() => (this.#claim.get(BLOCK_SCOPE, now, now) as { id: number }).id);
      this.#nextId = top - SESSION_ID_BLOCK + 1;
      this.#endId = top;
    }
    return this.#nextId++;
  }

  /** A synchronous session write; a storage fault becomes STORAGE_UNAVAILABLE (retryable). */
  #write<T>(write: () => T): T {
    try {
      return write();
    } catch (err) {
      if (!isStorageFault(err)) throw err;
      // Degraded: the group's retry loop probes until writes work, which wakes `whenWritable`.
      this.#group?.failed(err);
      throw new CodedError('STORAGE_UNAVAILABLE', `a new session could not be stored (${err.code})`, { retryable: true, cause: err });
    }
  }

  async whenWritable(signal: AbortSignal): Promise<boolean> {
    if (this.#group) return this.#group.whenWritable(signal);
    // No group commit (a bare store in tests): nothing probes, so try again after a pause.
    await sleep(100, signal);
    return !signal.aborted;
  }

  /** Adds a finished turn (replacing an earlier run's, see `Sessions.append`); it rides the group commit when there is one. */
  append(sessionId: number, turn: Omit<StoredTurn, 'createdAt' | 'rowId'>, replaces?: StoredTurn): void {
    const now = Date.now();
    // This turn is the session's newest now: no earlier run is found behind it.
    this.#newestRead.delete(sessionId);
    const replaced = replaces?.rowId;
    const info = this.#bySession.get(sessionId);
    if (info) {
      if (replaced === undefined) info.turns++;
      info.lastActiveAt = now;
    }
    const row = { sessionId, ...turn, toolCalls: JSON.stringify(turn.toolCalls), createdAt: now, origin: turn.origin ?? null };
    const write = () => {
      if (replaced !== undefined) this.#replace.run(sessionId, replaced);
      this.#addTurn.run(row);
      this.#touch.run(now, sessionId);
    };
    if (this.#group) this.#group.add(write);
    else write();
  }

  /** The newest `limit` turns, oldest first (tool calls are parsed only when asked for). */
  recent(sessionId: number, limit = 200): StoredTurn[] {
    // A session with no turn yet (every new conversation's first): nothing to read, and no
    // reason to commit the group now.
    if (this.#bySession.get(sessionId)?.turns === 0) return [];
    // The previous turn of this conversation may still be waiting in the group commit.
    this.#group?.flush();
    return (this.#turns.all(sessionId, limit) as TurnRow[]).reverse().map(storedTurn);
  }

  earlierRun(sessionId: number, related: (origin: string) => boolean): StoredTurn | undefined {
    const newest = this.#newestRead.get(sessionId);
    if (newest === undefined || !related(newest)) return undefined;
    // An earlier process's row: already committed, nothing of the group commit to wait for.
    const row = this.#byOrigin.get(sessionId, newest) as TurnRow | undefined;
    return row && storedTurn(row);
  }

  /** Per scope under a prefix (e.g. a channel's `id:`): how many sessions and the last activity. */
  summary(agent: string, scopePrefix: string): Array<{ scope: string; sessions: number; lastActiveAt: number }> {
    // New sessions and their last turns may still be waiting in the group commit.
    this.#group?.flush();
    return (this.#summary.all(agent, `${likePrefix(scopePrefix)}%`) as Array<{ scope: string; sessions: number; last_active_at: number }>).map((r) => ({
      scope: r.scope,
      sessions: r.sessions,
      lastActiveAt: r.last_active_at,
    }));
  }
}

/** A session as read from the database, with its newest turn's origin then. */
type Loaded = { info: SessionInfo; newest: string | null };

const TURN_COLUMNS = 'id, user_text, assistant_text, reasoning, tool_calls, ending, model, created_at, origin';

type TurnRow = {
  id: number;
  user_text: string;
  assistant_text: string;
  reasoning: string;
  tool_calls: string;
  ending: TurnEndingKind;
  model: string | null;
  created_at: number;
  origin: string | null;
};

function storedTurn(r: TurnRow): StoredTurn {
  return {
    userText: r.user_text,
    assistantText: r.assistant_text,
    reasoning: r.reasoning,
    get toolCalls() {
      return JSON.parse(r.tool_calls) as unknown[];
    },
    ending: r.ending,
    model: r.model,
    createdAt: r.created_at,
    origin: r.origin,
    rowId: r.id,
  };
}

/** The key of an (agent, scope) in the stores' caches (sessions and conversation preferences). */
export function cacheKey(agent: string, scope: string): string {
  return `${agent}\u0000${scope}`;
}

/** A LIKE pattern matching `prefix` literally: channel ids may hold `_` and `%`, which LIKE treats as wildcards. */
function likePrefix(prefix: string): string {
  return prefix.replace(/[\\%_]/g, '\\$&');
}

/** Whether `err` is a session write the store refused for now (see `Sessions.start`). */
export function isRefusedForNow(err: unknown): boolean {
  return err instanceof CodedError && err.code === 'STORAGE_UNAVAILABLE';
}

/**
 * Runs `act` (which may create a session) and, while the store refuses that write, waits
 * until it takes writes and runs it again: a turn waits for storage, as its reply's first
 * message would, instead of failing. Synchronous when `act` succeeds at once (the common
 * case, so a hook stays synchronous); rejects with the abort reason when `signal` aborts.
 */
export function whenSessionsWritable<T>(sessions: Sessions, signal: AbortSignal, act: () => T): T | Promise<T> {
  try {
    return act();
  } catch (err) {
    if (!isRefusedForNow(err) || !sessions.whenWritable) throw err;
    return retryWhenWritable(sessions, signal, act, err);
  }
}

async function retryWhenWritable<T>(sessions: Sessions, signal: AbortSignal, act: () => T, first: unknown): Promise<T> {
  let last = first;
  for (;;) {
    if (!(await sessions.whenWritable!(signal))) throw signal.aborted ? signal.reason : last;
    try {
      return act();
    } catch (err) {
      if (!isRefusedForNow(err)) throw err;
      last = err;
    }
  }
}
