import type { StoredTurn } from '../store/sessions.js';
import type { HistoryMessage } from './runner.js';

export const INTERRUPTED_MARKER = '[interrupted]';

/**
 * The history sent to the model: the newest turns that fit `budgetChars`, as user/assistant
 * pairs (never a system message in the middle). A cancelled turn is replayed as its partial
 * text plus "[interrupted]"; error markers never reach the model (only the model's own
 * partial text is stored); a turn that produced nothing is left out.
 */
export function buildHistory(turns: readonly StoredTurn[], budgetChars: number): HistoryMessage[] {
  const out: HistoryMessage[][] = [];
  let used = 0;
  for (let i = turns.length - 1; i >= 0; i--) {
    const t = turns[i]!;
    let answer = t.assistantText.trim();
    if (t.ending === 'cancelled') answer = answer ? `${answer} ${INTERRUPTED_MARKER}` : INTERRUPTED_MARKER;
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
