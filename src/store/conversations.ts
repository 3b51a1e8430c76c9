import type { QueueMode } from '../config/schema.js';
import type { Db } from './db.js';
import type { GroupCommit } from './group-commit.js';
import { ThisTurnReads } from './next-turn.js';
import { cacheKey } from './sessions.js';

/** What a conversation chose with /model, /queue and /mode. */
export interface ConversationPrefs {
  model?: string;
  queueMode?: QueueMode;
  /** Modes switched on or off here, overriding the agent's defaults. */
  modes?: Record<string, boolean>;
}

/** The preferences contract, kept by SQLite here and by PostgreSQL in cluster mode. */
export interface Conversations {
  get(agent: string, scope: string): ConversationPrefs;
  update(agent: string, scope: string, patch: Partial<ConversationPrefs>): ConversationPrefs;
}

/** Per-(agent, scope) preferences, kept across restarts. */
export class ConversationStore implements Conversations {
  readonly #get;
  readonly #put;
  readonly #cache = new Map<string, ConversationPrefs>();
  /** What `warm` read, until the event loop's next turn. */
  readonly #warmed = new ThisTurnReads<ConversationPrefs>();

  constructor(
    db: Db,
    private readonly group?: GroupCommit,
  ) {
    this.#get = db.prepare(`SELECT model, queue_mode, modes FROM conversations WHERE agent = ? AND scope = ?`);
    this.#put = db.prepare(
      `INSERT INTO conversations (agent, scope, model, queue_mode, modes) VALUES (@agent, @scope, @model, @queueMode, @modes)
       ON CONFLICT (agent, scope) DO UPDATE SET model = excluded.model, queue_mode = excluded.queue_mode, modes = excluded.modes`,
    );
  }

  get(agent: string, scope: string): ConversationPrefs {
    const key = cacheKey(agent, scope);
    const hit = this.#cache.get(key);
    if (hit) return hit;
    const prefs = this.#warmed.take(key) ?? this.#read(agent, scope);
    if (this.#cache.size > 5000) this.#cache.clear();
    this.#cache.set(key, prefs);
    return prefs;
  }

  #read(agent: string, scope: string): ConversationPrefs {
    const row = this.#get.get(agent, scope) as { model: string | null; queue_mode: QueueMode | null; modes: string | null } | undefined;
    return {
      ...(row?.model ? { model: row.model } : {}),
      ...(row?.queue_mode ? { queueMode: row.queue_mode } : {}),
      ...(row?.modes ? { modes: JSON.parse(row.modes) as Record<string, boolean> } : {}),
    };
  }

  /**
   * Reads the preferences of these conversations now (see `Inbox.readAlongside`): `get` uses
   * them in place of its own read only until the event loop's next turn, as SessionStore's
   * `warm` does and for the same reason.
   */
  warm(keys: Iterable<readonly [agent: string, scope: string]>): void {
    for (const [agent, scope] of keys) {
      const key = cacheKey(agent, scope);
      if (!this.#cache.has(key)) this.#warmed.put(key, this.#read(agent, scope));
    }
  }

  update(agent: string, scope: string, patch: Partial<ConversationPrefs>): ConversationPrefs {
    const next = { ...this.get(agent, scope), ...patch };
    const row = { agent, scope, model: next.model ?? null, queueMode: next.queueMode ?? null, modes: next.modes ? JSON.stringify(next.modes) : null };
    // The choice applies at once from the cache; while the store refuses writes it waits in the retries.
    if (this.group) this.group.now(() => this.#put.run(row));
    else this.#put.run(row);
    this.#cache.set(cacheKey(agent, scope), next);
    return next;
  }
}
