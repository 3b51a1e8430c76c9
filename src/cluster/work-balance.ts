import type { LeaseRow } from './leases.js';

/** Turns running and items queued on one instance: the work it has in hand. */
export interface InstanceLoad {
  id: string;
  load: number;
}

/** The other live instances' work in hand, from their heartbeat leases (as of their last renewal). */
export function peerLoads(rows: readonly LeaseRow[], me: string): InstanceLoad[] {
  return rows.filter((r) => !r.expired && r.owner !== me).map((r) => ({ id: r.owner, load: Number(r.info?.in_flight ?? 0) + Number(r.info?.queued ?? 0) }));
}

/**
 * The partition to hand to a less loaded instance, if moving one makes the two closer: only a
 * partition with queued items and no running turn moves (its conversations lose nothing by it:
 * their next turns start on the other instance as soon as it takes them), and only when its
 * items are fewer than the difference, so the move never merely swaps which side has more (no
 * ping-pong). The one that leaves the two closest is chosen.
 */
export function partitionToShed(
  mine: ReadonlyArray<{ partition: number; inFlight: number; queued: number }>,
  myLoad: number,
  lightest: number,
): number | undefined {
  const gap = myLoad - lightest;
  let best: { partition: number; after: number } | undefined;
  for (const p of mine) {
    if (p.inFlight > 0 || p.queued === 0 || p.queued >= gap) continue;
    const after = Math.abs(gap - 2 * p.queued);
    if (!best || after < best.after) best = { partition: p.partition, after };
  }
  return best?.partition;
}
