import { describe, expect, it } from 'vitest';
import { buildHistory, FAILED_MARKER, INTERRUPTED_MARKER } from '../../../src/agent/history.js';
import type { StoredTurn } from '../../../src/store/sessions.js';

const turn = (userText: string, assistantText: string, ending: StoredTurn['ending'] = 'done'): StoredTurn => ({
  userText,
  assistantText,
  reasoning: '',
  toolCalls: [],
  ending,
  model: null,
  createdAt: 0,
});

describe('buildHistory', () => {
  it('keeps the newest turns that fit the budget, oldest first, as user/assistant pairs', () => {
    const turns = [turn('a'.repeat(10), 'b'.repeat(10)), turn('c'.repeat(10), 'd'.repeat(10)), turn('e'.repeat(10), 'f'.repeat(10))];
    expect(buildHistory(turns, 45).map((m) => m.content[0])).toEqual(['c', 'd', 'e', 'f']);
    expect(buildHistory(turns, 1000).map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant', 'user', 'assistant']);
    expect(buildHistory(turns, 5)).toEqual([]);
  });

  it('replays a cancelled turn as its partial text plus the interrupted marker', () => {
    expect(buildHistory([turn('q', 'half an ans', 'cancelled')], 100)).toEqual([
      { role: 'user', content: 'q' },
      { role: 'assistant', content: `half an ans ${INTERRUPTED_MARKER}` },
    ]);
  });

  it('marks an error turn like an interrupted one, so it is never fed back as an answer; drops done turns with nothing said', () => {
    expect(buildHistory([turn('q0', '', 'done'), turn('q1', '', 'error'), turn('q2', 'partial', 'error')], 200)).toEqual([
      { role: 'user', content: 'q1' },
      { role: 'assistant', content: FAILED_MARKER },
      { role: 'user', content: 'q2' },
      { role: 'assistant', content: `partial ${FAILED_MARKER}` },
    ]);
  });
});
