import type { ApprovalOffer, ApprovalRow, ApprovalState, Approvals } from '../store/approvals.js';

const COLUMNS = `key, id, scope, tool, state, decided_by AS "decidedBy", result, prompt_ref AS "promptRef", offer`;
import type { PgWriter } from './pg-writer.js';

/**
 * Tool-approval decisions in PostgreSQL, so a turn that another instance takes over (its
 * owner died while the question waited, or mid-call) finds what was decided and never
 * starts a call twice. Each write is committed before its promise resolves (and rejects
 * when it was not), so `update(key, 'running')` is durable before the call starts, as on
 * SQLite. Approvals are rare: one statement each, outside the write-behind queue.
 */
export class PgApprovalStore implements Approvals {
  constructor(private readonly w: PgWriter) {}

  async get(key: string): Promise<ApprovalRow | undefined> {
    const [row] = await this.w.read<ApprovalRow>(`SELECT ${COLUMNS} FROM tool_approvals WHERE key = $1`, [key]);
    return row;
  }

  ask(key: string, id: string, scope: string, tool: string): Promise<void> {
    return this.w.exec(
      `INSERT INTO tool_approvals (key, id, scope, tool, state, prompt_ref, updated_at) VALUES ($1, $2, $3, $4, 'pending', NULL, $5)
       ON CONFLICT (key) DO UPDATE SET id = excluded.id, state = 'pending', decided_by = NULL, offer = NULL, updated_at = excluded.updated_at`,
      [key, id, scope, tool, Date.now()],
    );
  }

  update(key: string, state: ApprovalState, patch: { decidedBy?: string; result?: string; promptRef?: string } = {}): Promise<void> {
    return this.w.exec(
      `UPDATE tool_approvals SET state = $2, decided_by = COALESCE($3, decided_by), result = COALESCE($4, result), prompt_ref = COALESCE($5, prompt_ref), updated_at = $6 WHERE key = $1`,
      [key, state, patch.decidedBy ?? null, patch.result ?? null, patch.promptRef ?? null, Date.now()],
    );
  }

  pending(id: string): Promise<ApprovalRow[]> {
    return this.w.read<ApprovalRow>(`SELECT ${COLUMNS} FROM tool_approvals WHERE id = $1 AND state = 'pending'`, [id]);
  }

  async offer(key: string, id: string, offer: ApprovalOffer): Promise<boolean> {
    const rows = await this.w.read<{ key: string }>(
      `UPDATE tool_approvals SET offer = $3, updated_at = $4 WHERE key = $1 AND id = $2 AND state = 'pending' RETURNING key`,
      [key, id, JSON.stringify(offer), Date.now()],
    );
    return rows.length > 0;
  }
}
