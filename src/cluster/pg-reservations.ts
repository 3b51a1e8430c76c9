import { CodedError, errorMessage } from '../contracts/errors.js';
import type { Logger } from '../observe/logger.js';
import { fits, holdOnce, type Reservation, type SpendQuota, type SpendReservations, type WindowStanding } from '../store/reservations.js';
import { checkOut } from './pg-checkout.js';
import type { PgWriter } from './pg-writer.js';

/**
 * How long a hold counts when its turn never settles it (its instance died). Longer than
 * any turn should take, approvals included; a turn that outlives it lets others reserve
 * what it still holds.
 */
const HOLD_TTL_MS = 30 * 60_000;

/**
 * Spend reservations for the whole cluster in PostgreSQL. A window is one row
 * (`spend_windows`: what was settled) and each open reservation one row (`spend_holds`).
 * Reserving locks the window's row, so reservations of every instance for one key are
 * serialised: the sum of settled and held amounts seen is exact, and `fits` decides as on
 * one node. Settling removes the hold and adds the real amount in
 * one statement, so the spend never disappears between the two.
 */
export class PgReservations implements SpendReservations {
  constructor(
    private readonly w: PgWriter,
    private readonly log: Logger,
  ) {}

  async reserve(quota: SpendQuota, amount: number, nowMs = Date.now()): Promise<Reservation> {
    const window = [quota.key, quota.windowStartMs];
    const [known] = await this.w.read('SELECT 1 FROM spend_windows WHERE key = $1 AND window_start = $2', window);
    // The first reservation of a window starts it from what the ledger holds (the first insert wins).
    if (!known) {
      await this.w.exec('INSERT INTO spend_windows (key, window_start, settled) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', [
        ...window,
        await quota.recorded(),
      ]);
      // The key's ended windows go (written behind): a quota key per sender and hour would otherwise pile up.
      this.w.add('DELETE FROM spend_windows WHERE key = $1 AND window_start < $2', window);
    }
    const { client, release, abandon } = await checkOut(this.w.pool).catch((err: unknown) => {
      throw new CodedError('CLUSTER_UNAVAILABLE', `PostgreSQL: ${errorMessage(err)}`, { cause: err });
    });
    let id: string;
    try {
      await client.query('BEGIN');
      // The row lock serialises reservations of this window across instances; the sum below
      // is read after it is taken, so it sees every hold committed before.
      const { rows } = await client.query<{ settled: number }>('SELECT settled FROM spend_windows WHERE key = $1 AND window_start = $2 FOR UPDATE', window);
      const held = await client.query<{ held: number }>(
        'SELECT COALESCE(SUM(amount), 0)::float8 AS held FROM spend_holds WHERE key = $1 AND window_start = $2 AND expires_at > $3',
        [...window, nowMs],
      );
      const settled = rows[0]?.settled ?? 0;
      if (!fits(settled, held.rows[0]!.held, amount, quota.limit)) {
        await client.query('COMMIT');
        return { granted: false, settled, held: held.rows[0]!.held };
      }
      const ins = await client.query<{ id: string }>('INSERT INTO spend_holds (key, window_start, amount, expires_at) VALUES ($1, $2, $3, $4) RETURNING id', [
        ...window,
        amount,
        nowMs + HOLD_TTL_MS,
      ]);
      await client.query('DELETE FROM spend_holds WHERE key = $1 AND window_start < $2', [quota.key, quota.windowStartMs]);
      await client.query('COMMIT');
      id = ins.rows[0]!.id;
    } catch (err) {
      await abandon(err);
      throw new CodedError('CLUSTER_UNAVAILABLE', `PostgreSQL: ${errorMessage(err)}`, { cause: err });
    } finally {
      release();
    }
    return {
      granted: true,
      hold: holdOnce(amount, async (actual) => {
        try {
          await this.w.exec(
            `WITH gone AS (DELETE FROM spend_holds WHERE id = $1 RETURNING key, window_start)
             UPDATE spend_windows s SET settled = s.settled + $2 FROM gone WHERE s.key = gone.key AND s.window_start = gone.window_start`,
            [id, actual],
          );
        } catch (err) {
          // The hold counts until it expires; the spend itself is in the usage ledger.
          this.log.warn({ err, key: quota.key }, 'a spend reservation could not be settled');
        }
      }),
    };
  }

  async peek(key: string, windowStartMs: number, nowMs = Date.now()): Promise<WindowStanding | undefined> {
    const [row] = await this.w.read<{ settled: number; held: number }>(
      `SELECT settled, (SELECT COALESCE(SUM(amount), 0)::float8 FROM spend_holds h WHERE h.key = s.key AND h.window_start = s.window_start AND h.expires_at > $3) AS held
       FROM spend_windows s WHERE key = $1 AND window_start = $2`,
      [key, windowStartMs, nowMs],
    );
    return row ? { key, settled: row.settled, held: row.held } : undefined;
  }

  async top(prefix: string, windowStartMs: number, limit: number, nowMs = Date.now()): Promise<WindowStanding[]> {
    // starts_with, not LIKE: "_" in a channel id is no wildcard there.
    return this.w.read<WindowStanding>(
      `SELECT key, settled, (SELECT COALESCE(SUM(amount), 0)::float8 FROM spend_holds h WHERE h.key = s.key AND h.window_start = s.window_start AND h.expires_at > $3) AS held
       FROM spend_windows s WHERE starts_with(key, $1) AND window_start = $2 ORDER BY settled DESC LIMIT $4`,
      [prefix, windowStartMs, nowMs, limit],
    );
  }
}
