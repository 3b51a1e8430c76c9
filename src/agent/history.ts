import type { StoredTurn } from '../store/sessions.js';
import type { HistoryMessage } from '../contracts/agent-runner.js';

export const INTERRUPTED_MARKER = '[interrupted]';
/** Marks a turn that ended in an error, so the model never reads it as a finished answer. */
export const FAILED_MARKER = '[failed: this answer broke off with an error]';

/**
 * The history sent to the model: the newest turns that fit `budgetChars`, as user/assistant
 * pairs (never a system message in the middle). A cancelled turn is replayed as its partial
 * text plus "[interrupted]", a failed one as its partial text plus the failed marker (the
 * user-facing error note itself is never stored); a done turn that produced nothing is left out.
 */
export function buildHistory(turns: readonly StoredTurn[], budgetChars: number): HistoryMessage[] {
  const out: HistoryMessage[][] = [];
  let used = 0;
  for (let i = turns.length - 1; i >= 0; i--) {
    const t = turns[i]!;
    let answer = t.assistantText.trim();
    const marker = t.ending === 'cancelled' ? INTERRUPTED_MARKER : t.ending === 'error' ? FAILED_MARKER : undefined;
    if (marker) answer = answer ? `${answer} ${marker}` : marker;
    if (!answer) continue;
    const size = t.userText.length + answer.length;
    if (used + size > budgetChars) break;
    used += size;
    out.push([
      { role: 'user', content: t.userText },
      { role: 'assistant', content: answer },
    ]);
  }
  return out.reverse().flat();
}
