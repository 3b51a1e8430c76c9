import type { QueueMode } from '../config/schema.js';
import { CodedError } from '../contracts/errors.js';
import type { PgWriter } from './pg-writer.js';
import type { ConversationPrefs, Conversations } from '../store/conversations.js';
import type { SessionInfo, SessionSummaryRow, Sessions, StoredTurn, TurnEndingKind } from '../store/sessions.js';

const key = (agent: string, scope: string) => `${agent}\u0000${scope}`;

/** Session ids come from a sequence in blocks, so `start()` can hand one out synchronously. */
const ID_BLOCK = 1000;

/**
 * Sessions in PostgreSQL. `prepare(agent, scope)` loads a conversation's active session and
 * its recent turns before a turn runs there; the synchronous reads then come from memory
 * (valid because one conversation runs on one instance at a time: its partition's owner),
 * and writes go behind through the PgWriter, committed before the turn's item is acked.
 */
export class PgSessionStore implements Sessions {
  readonly #active = new Map<string, SessionInfo>();
  readonly #turns = new Map<number, StoredTurn[]>();
  /** Per session loaded by `prepare`: its newest turn then, when it has an origin (`earlierRun`), until a turn is appended. */
  readonly #newestRead = new Map<number, StoredTurn>();
  #nextId = 0;
  #endId = 0;
  #refilling: Promise<void> | undefined;

  constructor(private readonly w: PgWriter) {}

  async #refill(): Promise<void> {
    this.#refilling ??= this.w
      .read<{ id: string }>(`SELECT nextval('session_ids') AS id`, [])
      .then(([row]) => {
        this.#nextId = Number(row!.id);
        this.#endId = this.#nextId + ID_BLOCK;
      })
      .finally(() => (this.#refilling = undefined));
    await this.#refilling;
  }

  /** Loads what a turn of (agent, scope) will read. */
  async prepare(agent: string, scope: string): Promise<void> {
    if (this.#endId - this.#nextId < 100) await this.#refill();
    if (this.#active.has(key(agent, scope))) return;
    await this.w.flush(); // this instance's own writes first
    const [row] = await this.w.read<{ id: string; created_at: string; last_active_at: string }>(
      'SELECT id, created_at, last_active_at FROM sessions WHERE agent = $1 AND scope = $2 ORDER BY id DESC LIMIT 1',
      [agent, scope],
    );
    if (!row) return;
    const id = Number(row.id);
    const turns = await this.w.read<{
      id: string;
      user_text: string;
      assistant_text: string;
      reasoning: string;
      tool_calls: unknown[];
      ending: TurnEndingKind;
      model: string | null;
      created_at: string;
      origin: string | null;
    }>(
      'SELECT id, user_text, assistant_text, reasoning, tool_calls, ending, model, created_at, origin FROM turns WHERE session_id = $1 ORDER BY id DESC LIMIT 200',
      [id],
    );
    const [count] = await this.w.read<{ n: string }>('SELECT COUNT(*) AS n FROM turns WHERE session_id = $1', [id]);
    const list = turns.reverse().map(
      (r): StoredTurn => ({
        userText: r.user_text,
        assistantText: r.assistant_text,
        reasoning: r.reasoning,
        toolCalls: r.tool_calls,
        ending: r.ending,
        model: r.model,
        createdAt: Number(r.created_at),
        origin: r.origin,
        rowId: Number(r.id),
      }),
    );
    this.#turns.set(id, list);
    const newest = list.at(-1);
    if (newest?.origin) this.#newestRead.set(id, newest);
    this.#active.set(key(agent, scope), { id, createdAt: Number(row.created_at), lastActiveAt: Number(row.last_active_at), turns: Number(count!.n) });
  }

  /** Drops what was loaded for matching scopes (their partition changed hands: another instance may have written since). */
  forget(match: (scope: string) => boolean): void {
    for (const [k, info] of this.#active) {
      if (!match(k.slice(k.indexOf('\u0000') + 1))) continue;
      this.#active.delete(k);
      this.#turns.delete(info.id);
      this.#newestRead.delete(info.id);
    }
  }

  active(agent: string, scope: string): SessionInfo {
    return this.find(agent, scope) ?? this.start(agent, scope);
  }

  find(agent: string, scope: string): SessionInfo | undefined {
    const hit = this.#active.get(key(agent, scope));
    return hit && { ...hit };
  }

  start(agent: string, scope: string): SessionInfo {
    if (this.#nextId >= this.#endId) throw new CodedError('CLUSTER_UNAVAILABLE', 'no session id available: PostgreSQL was not reached before the turn');
    const id = this.#nextId++;
    if (this.#endId - this.#nextId < 100) void this.#refill().catch(() => {});
    const now = Date.now();
    const info = { id, createdAt: now, lastActiveAt: now, turns: 0 };
    this.#active.set(key(agent, scope), info);
    this.#turns.set(id, []);
    this.w.add('INSERT INTO sessions (id, agent, scope, created_at, last_active_at) VALUES ($1, $2, $3, $4, $4)', [id, agent, scope, now]);
    return { ...info };
  }

  /** Adds a finished turn, replacing an earlier run's of the same message (see `Sessions.append`). */
  append(sessionId: number, turn: Omit<StoredTurn, 'createdAt' | 'rowId'>, replaces?: StoredTurn): void {
    const now = Date.now();
    const origin = turn.origin ?? null;
    // This turn is the session's newest now: no earlier run is found behind it.
    this.#newestRead.delete(sessionId);
    const replaced = replaces?.rowId;
    for (const info of this.#active.values()) {
      if (info.id !== sessionId) continue;
      if (replaced === undefined) info.turns++;
      info.lastActiveAt = now;
    }
    const list = this.#turns.get(sessionId);
    if (list) {
      const at = replaced === undefined ? -1 : list.findIndex((t) => t.rowId === replaced);
      if (at >= 0) list.splice(at, 1);
      list.push({ ...turn, createdAt: now, origin });
      if (list.length > 200) list.splice(0, list.length - 200);
    }
    if (replaced !== undefined) this.w.add('DELETE FROM turns WHERE session_id = $1 AND id = $2', [sessionId, replaced]);
    this.w.add(
      'INSERT INTO turns (session_id, user_text, assistant_text, reasoning, tool_calls, ending, model, created_at, origin) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)',
      [sessionId, turn.userText, turn.assistantText, turn.reasoning, JSON.stringify(turn.toolCalls), turn.ending, turn.model, now, origin],
    );
    this.w.add('UPDATE sessions SET last_active_at = $1 WHERE id = $2', [now, sessionId]);
  }

  recent(sessionId: number, limit = 200): StoredTurn[] {
    return (this.#turns.get(sessionId) ?? []).slice(-limit);
  }

  earlierRun(sessionId: number, related: (origin: string) => boolean): StoredTurn | undefined {
    const newest = this.#newestRead.get(sessionId);
    return newest?.origin && related(newest.origin) ? newest : undefined;
  }

  async summary(agent: string, scopePrefix: string): Promise<SessionSummaryRow[]> {
    await this.w.flush();
    const rows = await this.w.read<{ scope: string; sessions: string; last_active_at: string }>(
      `SELECT scope, COUNT(*) AS sessions, MAX(last_active_at) AS last_active_at FROM sessions WHERE agent = $1 AND scope LIKE $2 GROUP BY scope ORDER BY MAX(last_active_at) DESC`,
      [agent, `${scopePrefix.replace(/[\\%_]/g, '\\$&')}%`],
    );
    return rows.map((r) => ({ scope: r.scope, sessions: Number(r.sessions), lastActiveAt: Number(r.last_active_at) }));
  }
}

/** Conversation preferences in PostgreSQL: loaded by `prepare`, written behind. */
export class PgConversationStore implements Conversations {
  readonly #cache = new Map<string, ConversationPrefs>();

  constructor(private readonly w: PgWriter) {}

  async prepare(agent: string, scope: string): Promise<void> {
    if (this.#cache.has(key(agent, scope))) return;
    await this.w.flush();
    const [row] = await this.w.read<{ model: string | null; queue_mode: QueueMode | null; modes: Record<string, boolean> | null }>(
      'SELECT model, queue_mode, modes FROM conversations WHERE agent = $1 AND scope = $2',
      [agent, scope],
    );
    this.#cache.set(key(agent, scope), {
      ...(row?.model ? { model: row.model } : {}),
      ...(row?.queue_mode ? { queueMode: row.queue_mode } : {}),
      ...(row?.modes ? { modes: row.modes } : {}),
    });
  }

  forget(match: (scope: string) => boolean): void {
    for (const k of this.#cache.keys()) if (match(k.slice(k.indexOf('\u0000') + 1))) this.#cache.delete(k);
  }

  get(agent: string, scope: string): ConversationPrefs {
    return this.#cache.get(key(agent, scope)) ?? {};
  }

  update(agent: string, scope: string, patch: Partial<ConversationPrefs>): ConversationPrefs {
    const next = { ...this.get(agent, scope), ...patch };
    this.#cache.set(key(agent, scope), next);
    this.w.add(
      `INSERT INTO conversations (agent, scope, model, queue_mode, modes) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (agent, scope) DO UPDATE SET model = excluded.model, queue_mode = excluded.queue_mode, modes = excluded.modes`,
      [agent, scope, next.model ?? null, next.queueMode ?? null, next.modes ? JSON.stringify(next.modes) : null],
    );
    return next;
  }
}
