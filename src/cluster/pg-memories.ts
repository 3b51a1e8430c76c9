import { MAX_MEMORIES_PER_USER, memoryFull, memoryText, queryWords, type Memories, type MemoryRow } from '../store/memories.js';
import type { PgWriter } from './pg-writer.js';

const COLUMNS = `id::int AS id, text, created_at::float8 AS "createdAt"`;

/**
 * Users' memories in PostgreSQL, so a memory kept through one instance is recalled on any
 * other. Recall is PostgreSQL full-text search with the `simple` configuration (no
 * language's stemming or stop words: memories are in whatever language users write).
 * Each write is one statement committed before its promise resolves, outside the
 * write-behind queue: a user who was told "remembered" finds it on the next turn anywhere.
 */
export class PgMemoryStore implements Memories {
  constructor(private readonly w: PgWriter) {}

  async add(agent: string, user: string, text: string): Promise<MemoryRow> {
    const t = memoryText(text);
    // The bound is checked in the insert itself. Inserts of one user racing on several
    // instances may each pass it (a statement counts what was committed before it began):
    // the bound keeps a user's memories from growing without end, not to an exact count.
    const [row] = await this.w.read<MemoryRow>(
      `INSERT INTO memories (agent, user_key, text, created_at)
       SELECT $1, $2, $3, $4 WHERE (SELECT count(*) FROM memories WHERE agent = $1 AND user_key = $2) < $5
       RETURNING ${COLUMNS}`,
      [agent, user, t, Date.now(), MAX_MEMORIES_PER_USER],
    );
    if (!row) throw memoryFull();
    return row;
  }

  list(agent: string, user: string): Promise<MemoryRow[]> {
    return this.w.read<MemoryRow>(`SELECT ${COLUMNS} FROM memories WHERE agent = $1 AND user_key = $2 ORDER BY id`, [agent, user]);
  }

  async search(agent: string, user: string, query: string, limit: number): Promise<MemoryRow[]> {
    const words = queryWords(query);
    if (!words.length) return [];
    // Letters and digits only (queryWords), so joining them with `|` is a valid tsquery.
    return this.w.read<MemoryRow>(
      `SELECT ${COLUMNS} FROM memories, to_tsquery('simple', $3) q
       WHERE agent = $1 AND user_key = $2 AND tsv @@ q ORDER BY ts_rank(tsv, q) DESC, id DESC LIMIT $4`,
      [agent, user, words.join(' | '), limit],
    );
  }

  recent(agent: string, user: string, limit: number): Promise<MemoryRow[]> {
    return this.w.read<MemoryRow>(`SELECT ${COLUMNS} FROM memories WHERE agent = $1 AND user_key = $2 ORDER BY id DESC LIMIT $3`, [agent, user, limit]);
  }

  async forget(agent: string, user: string, id: number): Promise<boolean> {
    const rows = await this.w.read(`DELETE FROM memories WHERE agent = $1 AND user_key = $2 AND id = $3 RETURNING id`, [agent, user, id]);
    return rows.length > 0;
  }

  async forgetAll(agent: string, user: string): Promise<number> {
    const rows = await this.w.read(`DELETE FROM memories WHERE agent = $1 AND user_key = $2 RETURNING id`, [agent, user]);
    return rows.length;
  }

  async setVector(agent: string, user: string, id: number, vector: readonly number[]): Promise<void> {
    await this.w.read(
      `INSERT INTO memory_vectors (memory_id, vector) SELECT id, $4 FROM memories WHERE id = $3 AND agent = $1 AND user_key = $2
       ON CONFLICT (memory_id) DO UPDATE SET vector = EXCLUDED.vector`,
      [agent, user, id, JSON.stringify(vector)],
    );
  }

  async withVectors(agent: string, user: string): Promise<Array<MemoryRow & { vector?: number[] }>> {
    const rows = await this.w.read<MemoryRow & { vector: number[] | null }>(
      `SELECT m.id::int AS id, m.text, m.created_at::float8 AS "createdAt", v.vector FROM memories m LEFT JOIN memory_vectors v ON v.memory_id = m.id
       WHERE m.agent = $1 AND m.user_key = $2 ORDER BY m.id`,
      [agent, user],
    );
    return rows.map(({ vector, ...r }) => (vector ? { ...r, vector } : r));
  }
}
