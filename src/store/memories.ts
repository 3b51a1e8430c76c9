import { CodedError } from '../contracts/errors.js';
import type { Db } from './db.js';

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
}

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
export function queryWords(text: string): string[] {
  const words = new Set<string>();
  for (const m of text.toLowerCase().matchAll(/[\p{L}\p{N}]+/gu)) {
    words.add(m[0]);
    if (words.size >= MAX_QUERY_WORDS) break;
  }
  return [...words];
}

const COLUMNS = 'id, text, created_at AS createdAt';

/** The memories table and its FTS5 index in the daemon's SQLite database. */
export class SqliteMemoryStore implements Memories {
  readonly #db: Db;
  readonly #insert;
  readonly #count;
  readonly #list;
  readonly #search;
  readonly #recent;
  readonly #forget;
  readonly #forgetAll;

  constructor(db: Db) {
    this.#db = db;
    // Created here rather than as a numbered migration: the tables are this feature's alone.
    // The FTS5 index holds the text only (external content); triggers keep it in step.
    db.exec(`CREATE TABLE IF NOT EXISTS memories (
      id INTEGER PRIMARY KEY,
      agent TEXT NOT NULL,
      user_key TEXT NOT NULL,
      text TEXT NOT NULL,
      created_at INTEGER NOT NULL
    );
    CREATE INDEX IF NOT EXISTS memories_user ON memories (agent, user_key, id);
    CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(text, content='memories', content_rowid='id');
    CREATE TRIGGER IF NOT EXISTS memories_ai AFTER INSERT ON memories BEGIN
      INSERT INTO memories_fts (rowid, text) VALUES (new.id, new.text);
    END;
    CREATE TRIGGER IF NOT EXISTS memories_ad AFTER DELETE ON memories BEGIN
      INSERT INTO memories_fts (memories_fts, rowid, text) VALUES ('delete', old.id, old.text);
    END;`);
    this.#insert = db.prepare(`INSERT INTO memories (agent, user_key, text, created_at) VALUES (?, ?, ?, ?) RETURNING ${COLUMNS}`);
    this.#count = db.prepare('SELECT count(*) AS n FROM memories WHERE agent = ? AND user_key = ?').pluck();
    this.#list = db.prepare(`SELECT ${COLUMNS} FROM memories WHERE agent = ? AND user_key = ? ORDER BY id`);
    this.#search = db.prepare(
      `SELECT m.id, m.text, m.created_at AS createdAt FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid
       WHERE memories_fts MATCH ? AND m.agent = ? AND m.user_key = ? ORDER BY bm25(memories_fts), m.id DESC LIMIT ?`,
    );
    this.#recent = db.prepare(`SELECT ${COLUMNS} FROM memories WHERE agent = ? AND user_key = ? ORDER BY id DESC LIMIT ?`);
    this.#forget = db.prepare('DELETE FROM memories WHERE agent = ? AND user_key = ? AND id = ?');
    this.#forgetAll = db.prepare('DELETE FROM memories WHERE agent = ? AND user_key = ?');
  }

  async add(agent: string, user: string, text: string): Promise<MemoryRow> {
    const t = memoryText(text);
    // Count and insert in one transaction, so two at once cannot pass the bound together.
    return this.#db
      .transaction(() => {
        if ((this.#count.get(agent, user) as number) >= MAX_MEMORIES_PER_USER) throw memoryFull();
        return this.#insert.get(agent, user, t, Date.now()) as MemoryRow;
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
    return this.#search.all(words.map((w) => `"${w}"`).join(' OR '), agent, user, limit) as MemoryRow[];
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
}
