import { createHash } from 'node:crypto';
import { CodedError } from '../contracts/errors.js';
import { type Db, INTEGER_PARAM, TEXT_PARAM } from './db.js';

/** Memories one user may keep with one agent; past it /remember asks them to forget some. */
export const MAX_MEMORIES_PER_USER = 200;
/** Characters one memory may hold. */
export const MAX_MEMORY_CHARS = 500;
/** Words of a message a recall searches for: a long message is not a long query. */
const MAX_QUERY_WORDS = 32;

export interface MemoryRow {
  id: number;
  text: string;
  createdAt: number;
}

/**
 * Facts users asked an agent to keep, per agent and user (`channelId:senderId`). SQLite
 * with FTS5 here on one node, PostgreSQL full-text in cluster mode
 * (src/cluster/pg-memories.ts). Every read and delete names the user: one user's memories
 * are never returned for another.
 */
export interface Memories {
  /** Stores a memory; MEMORY_TOO_LONG or MEMORY_FULL when it does not fit the bounds. */
  add(agent: string, user: string, text: string): Promise<MemoryRow>;
  /** The user's memories, oldest first. */
  list(agent: string, user: string): Promise<MemoryRow[]>;
  /** Those matching any word of `query`, best first; none when nothing matches. */
  search(agent: string, user: string, query: string, limit: number): Promise<MemoryRow[]>;
  /** The newest, newest first. */
  recent(agent: string, user: string, limit: number): Promise<MemoryRow[]>;
  /** Deletes one memory of the user's; false when they have none with that id. */
  forget(agent: string, user: string, id: number): Promise<boolean>;
  /** Deletes all the user's memories; how many there were. */
  forgetAll(agent: string, user: string): Promise<number>;
  /** Keeps a memory's embedding (`memory_embedding_model`), if the memory is the user's. */
  setVector(agent: string, user: string, id: number, vector: readonly number[]): Promise<void>;
  /** The user's memories with their embeddings (none where it was never computed), oldest first. */
  withVectors(agent: string, user: string): Promise<Array<MemoryRow & { vector?: number[] }>>;
}

/** The largest embedding kept: larger than any common model's (3072). */
export const MAX_VECTOR_DIMENSIONS = 4096;

/** The memory text as stored: trimmed, refused when empty or too long. */
export function memoryText(text: string): string {
  const t = text.trim();
  if (!t) throw new CodedError('MEMORY_EMPTY', 'a memory needs some text');
  if (t.length > MAX_MEMORY_CHARS) throw new CodedError('MEMORY_TOO_LONG', `a memory holds at most ${MAX_MEMORY_CHARS} characters; this one has ${t.length}`);
  return t;
}

/** The refusal when a user already keeps as many memories as they may. */
export function memoryFull(): CodedError {
  return new CodedError('MEMORY_FULL', `at most ${MAX_MEMORIES_PER_USER} memories per user`);
}

/**
 * The distinct words (letters and digits only) of a message, lower-cased and bounded, so
 * a query built from them cannot carry full-text syntax of its own.
 */
export function queryWords(text: string, max = MAX_QUERY_WORDS): string[] {
  const words = new Set<string>();
  for (const m of text.toLowerCase().matchAll(/[\p{L}\p{N}]+/gu)) {
    words.add(m[0]);
    if (words.size >= max) break;
  }
  return [...words];
}

const COLUMNS = 'id, text, created_at AS createdAt';

/**
 * Words as the full-text index holds them: each prefixed with a token naming the agent's
 * user (`o<hex>x`), so one user's word is a term of its own. The rows' columns stay the truth.
 */
function ownedTerms(agent: string, user: string, words: readonly string[]): string {
  const owner = `o${createHash('sha256').update(`${agent}\0${user}`).digest('hex').slice(0, 24)}x`;
  return words.map((w) => owner + w).join(' ');
}

/** The memories table and its FTS5 index in the daemon's SQLite database. */
export class SqliteMemoryStore implements Memories {
  readonly #db: Db;
  readonly #insert;
  readonly #index;
  readonly #count;
  readonly #list;
  readonly #search;
  readonly #recent;
  /** Read on every turn when `memory_embedding_model` is set: prepared once. */
  readonly #withVectors;
  readonly #forget;
  readonly #forgetAll;

  constructor(db: Db) {
    this.#db = db;
    // Created here rather than as a numbered migration: the tables are this feature's alone.
    // The FTS5 index holds each memory's words prefixed with a token of its owner
    // (ownedTerms), so a search reads one user's few memories, never the long lists of
    // everyone's memories sharing a common word: a plain index with an owner column took
    // 4.2 ms a search at 200 users x 200 memories, and grew with the users.
    db.exec(`CREATE TABLE IF NOT EXISTS memories (
      id INTEGER PRIMARY KEY,
      agent TEXT NOT NULL,
      user_key TEXT NOT NULL,
      text TEXT NOT NULL,
      created_at INTEGER NOT NULL
    );
    CREATE INDEX IF NOT EXISTS memories_user ON memories (agent, user_key, id);
    CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(terms);
    CREATE TRIGGER IF NOT EXISTS memories_ad AFTER DELETE ON memories BEGIN
      DELETE FROM memories_fts WHERE rowid = old.id;
    END;
    CREATE TABLE IF NOT EXISTS memory_vectors (memory_id INTEGER PRIMARY KEY, vector TEXT NOT NULL);
    CREATE TRIGGER IF NOT EXISTS memories_ad_vector AFTER DELETE ON memories BEGIN
      DELETE FROM memory_vectors WHERE memory_id = old.id;
    END;`);
    this.#insert = db.prepare(`INSERT INTO memories (agent, user_key, text, created_at) VALUES (?, ?, ?, ?) RETURNING ${COLUMNS}`);
    this.#index = db.prepare('INSERT INTO memories_fts (rowid, terms) VALUES (?, ?)');
    this.#count = db.prepare('SELECT count(*) AS n FROM memories WHERE agent = ? AND user_key = ?').pluck();
    this.#list = db.prepare(`SELECT ${COLUMNS} FROM memories WHERE agent = ${TEXT_PARAM} AND user_key = ${TEXT_PARAM} ORDER BY id`);
    this.#search = db.prepare(
      // The index is searched first (in the subquery), then the rows are read and their owner
      // checked again: a join SQLite plans from the memories side runs the MATCH once per row.
      // bm25's document frequencies are this user's own: each term is one user's word.
      `SELECT m.id, m.text, m.created_at AS createdAt
       FROM (SELECT rowid AS id, bm25(memories_fts) AS score FROM memories_fts WHERE memories_fts MATCH ? ORDER BY score LIMIT ${INTEGER_PARAM}) f
       JOIN memories m ON m.id = f.id WHERE m.agent = ${TEXT_PARAM} AND m.user_key = ${TEXT_PARAM} ORDER BY f.score, m.id DESC`,
    );
    this.#withVectors = db.prepare(
      `SELECT m.id, m.text, m.created_at AS createdAt, v.vector FROM memories m LEFT JOIN memory_vectors v ON v.memory_id = m.id
       WHERE m.agent = ${TEXT_PARAM} AND m.user_key = ${TEXT_PARAM} ORDER BY m.id`,
    );
    this.#recent = db.prepare(
      `SELECT ${COLUMNS} FROM memories WHERE agent = ${TEXT_PARAM} AND user_key = ${TEXT_PARAM} ORDER BY id DESC LIMIT ${INTEGER_PARAM}`,
    );
    this.#forget = db.prepare('DELETE FROM memories WHERE agent = ? AND user_key = ? AND id = ?');
    this.#forgetAll = db.prepare('DELETE FROM memories WHERE agent = ? AND user_key = ?');
  }

  async add(agent: string, user: string, text: string): Promise<MemoryRow> {
    const t = memoryText(text);
    // Count and insert in one transaction, so two at once cannot pass the bound together.
    return this.#db
      .transaction(() => {
        if ((this.#count.get(agent, user) as number) >= MAX_MEMORIES_PER_USER) throw memoryFull();
        const row = this.#insert.get(agent, user, t, Date.now()) as MemoryRow;
        this.#index.run(row.id, ownedTerms(agent, user, queryWords(t, MAX_MEMORY_CHARS)));
        return row;
      })
      .immediate();
  }

  async list(agent: string, user: string): Promise<MemoryRow[]> {
    return this.#list.all(agent, user) as MemoryRow[];
  }

  async search(agent: string, user: string, query: string, limit: number): Promise<MemoryRow[]> {
    const words = queryWords(query);
    if (!words.length) return [];
    // Each word quoted: FTS5 reads it as a plain term, never as an operator or a column.
    const match = ownedTerms(agent, user, words)
      .split(' ')
      .map((term) => `"${term}"`)
      .join(' OR ');
    return this.#search.all(match, limit, agent, user) as MemoryRow[];
  }

  async recent(agent: string, user: string, limit: number): Promise<MemoryRow[]> {
    return this.#recent.all(agent, user, limit) as MemoryRow[];
  }

  async forget(agent: string, user: string, id: number): Promise<boolean> {
    return this.#forget.run(agent, user, id).changes > 0;
  }

  async forgetAll(agent: string, user: string): Promise<number> {
    return this.#forgetAll.run(agent, user).changes;
  }

  async setVector(agent: string, user: string, id: number, vector: readonly number[]): Promise<void> {
    this.#db
      .prepare('INSERT OR REPLACE INTO memory_vectors (memory_id, vector) SELECT id, ? FROM memories WHERE id = ? AND agent = ? AND user_key = ?')
      .run(JSON.stringify(vector), id, agent, user);
  }

  async withVectors(agent: string, user: string): Promise<Array<MemoryRow & { vector?: number[] }>> {
    const rows = this.#withVectors.all(agent, user) as Array<MemoryRow & { vector: string | null }>;
    return rows.map(({ vector, ...r }) => (vector ? { ...r, vector: JSON.parse(vector) as number[] } : r));
  }
}
