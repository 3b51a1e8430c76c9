import { addColumn, type Db } from './db.js';

/**
 * pending: asked, no decision yet (after a restart: ask again). approved: may run.
 * denied: refused or timed out. running: the call was started (after a restart it is not
 * started again: it may have run). done: ran; `result` is what the model was told.
 */
export type ApprovalState = 'pending' | 'approved' | 'denied' | 'running' | 'done';

export interface ApprovalRow {
  key: string;
  id: string;
  scope: string;
  tool: string;
  state: ApprovalState;
  decidedBy: string | null;
  result: string | null;
  /** The prompt message in the chat (JSON MessageRef), so a later ask can retire it. */
  promptRef: string | null;
  /**
   * A decision left while no process waited on the question (JSON {verdict, by}): its turn
   * was being taken over. The turn applies it when it reaches the call again, if `by` may decide.
   */
  offer: string | null;
}

/** What `offer` holds. */
export interface ApprovalOffer {
  verdict: 'approve' | 'deny';
  by: string;
}

/**
 * Tool calls that needed approval, keyed by the turn's message and the call itself, so a
 * turn re-run after a crash (or, in cluster mode, on another instance) finds what was
 * decided and never starts a call twice. SQLite here on one node, PostgreSQL in cluster mode
 * (src/cluster/pg-approvals.ts); both pass test/store/contract.test.ts. A write has reached
 * the store when its promise resolves: the caller awaits `update(key, 'running')` before it
 * starts the call.
 */
export interface Approvals {
  get(key: string): Promise<ApprovalRow | undefined>;
  /** Records a new question (or asks again after a restart), keeping the old prompt's ref. */
  ask(key: string, id: string, scope: string, tool: string): Promise<void>;
  update(key: string, state: ApprovalState, patch?: { decidedBy?: string; result?: string; promptRef?: string }): Promise<void>;
  /** The questions still pending under this short id (it may repeat across conversations). */
  pending(id: string): Promise<ApprovalRow[]>;
  /** Leaves a decision on a pending question; false when it is no longer pending under `id`. */
  offer(key: string, id: string, offer: ApprovalOffer): Promise<boolean>;
}

const COLUMNS = 'key, id, scope, tool, state, decided_by AS decidedBy, result, prompt_ref AS promptRef, offer';

/** The approvals table in the daemon's SQLite database (each write is its own transaction). */
export class ApprovalStore implements Approvals {
  readonly #get;
  readonly #put;
  readonly #set;
  readonly #pending;
  readonly #offer;

  constructor(db: Db) {
    // Created here rather than as a numbered migration: the table is this feature's alone.
    db.exec(`CREATE TABLE IF NOT EXISTS tool_approvals (
      key TEXT PRIMARY KEY,
      id TEXT NOT NULL,
      scope TEXT NOT NULL,
      tool TEXT NOT NULL,
      state TEXT NOT NULL CHECK (state IN ('pending','approved','denied','running','done')),
      decided_by TEXT,
      result TEXT,
      prompt_ref TEXT,
      updated_at INTEGER NOT NULL
    )`);
    // Databases made before decisions could be left for a taken-over turn lack the column.
    addColumn(db, 'tool_approvals', 'offer', 'TEXT');
    this.#get = db.prepare(`SELECT ${COLUMNS} FROM tool_approvals WHERE key = ?`);
    this.#pending = db.prepare(`SELECT ${COLUMNS} FROM tool_approvals WHERE id = ? AND state = 'pending'`);
    this.#offer = db.prepare(`UPDATE tool_approvals SET offer = @offer, updated_at = @now WHERE key = @key AND id = @id AND state = 'pending'`);
    this.#put = db.prepare(
      `INSERT INTO tool_approvals (key, id, scope, tool, state, prompt_ref, updated_at) VALUES (@key, @id, @scope, @tool, 'pending', NULL, @now)
       ON CONFLICT (key) DO UPDATE SET id = excluded.id, state = 'pending', decided_by = NULL, offer = NULL, updated_at = excluded.updated_at`,
    );
    this.#set = db.prepare(
      `UPDATE tool_approvals SET state = @state, decided_by = COALESCE(@decidedBy, decided_by), result = COALESCE(@result, result), prompt_ref = COALESCE(@promptRef, prompt_ref), updated_at = @now WHERE key = @key`,
    );
  }

  async get(key: string): Promise<ApprovalRow | undefined> {
    return this.#get.get(key) as ApprovalRow | undefined;
  }

  async ask(key: string, id: string, scope: string, tool: string): Promise<void> {
    this.#put.run({ key, id, scope, tool, now: Date.now() });
  }

  async update(key: string, state: ApprovalState, patch: { decidedBy?: string; result?: string; promptRef?: string } = {}): Promise<void> {
    this.#set.run({ key, state, decidedBy: patch.decidedBy ?? null, result: patch.result ?? null, promptRef: patch.promptRef ?? null, now: Date.now() });
  }

  async pending(id: string): Promise<ApprovalRow[]> {
    return this.#pending.all(id) as ApprovalRow[];
  }

  async offer(key: string, id: string, offer: ApprovalOffer): Promise<boolean> {
    return this.#offer.run({ key, id, offer: JSON.stringify(offer), now: Date.now() }).changes > 0;
  }
}
