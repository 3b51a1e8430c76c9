/** Maps emptied when the event loop next turns, one setImmediate for all of them. */
const forgetting = new Set<Map<string, unknown>>();

/**
 * Empties `reads` when the event loop next turns: what a batch's transaction read stands in
 * for a turn's own read only in the microtasks right after it (see `readTurnStartsAlongside`).
 */
export function forgetNextTurn(reads: Map<string, unknown>): void {
  if (reads.size === 0 || forgetting.has(reads)) return;
  if (forgetting.size === 0)
    setImmediate(() => {
      for (const m of forgetting) m.clear();
      forgetting.clear();
    });
  forgetting.add(reads);
}
