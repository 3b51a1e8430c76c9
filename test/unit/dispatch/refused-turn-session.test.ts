import { describe, expect, it } from 'vitest';
import { openDb } from '../../../src/store/db.js';
import { SqliteUsageLedger } from '../../../src/store/usage-ledger.js';
import { waitFor } from '../../helpers/daemon.js';
import { pipeline } from '../../helpers/pipeline.js';
import { userMessage } from '../../helpers/recording-adapter.js';

// A turn the gates refuse (the daily budget spent) never reaches the agent: it leaves no session
// behind. Before, session_find created one for every new conversation, while the budget was spent too.

describe('a turn refused by the daily budget, in a new conversation', () => {
  it('gets the notice and stores no session; the next turn, with budget left, starts one as before', async () => {
    const db = openDb(':memory:');
    const ledger = new SqliteUsageLedger(db);
    ledger.record({
      at: Date.now(),
      agent: 'default',
      model: 'echo',
      channel: 't',
      scope: 't:earlier',
      inputTokens: 1,
      outputTokens: 1,
      reasoningTokens: 0,
      cachedTokens: 0,
      estimated: false,
      cost: 2,
    });
    const sessions = () => db.prepare('SELECT scope FROM sessions').all();
    const spent = pipeline(`[agent]\nprovider = "echo"\ndaily_budget = 1\n`, '', { db, workspace: { usage: { ledger } } });
    await spent.dispatcher.deliver(userMessage('t', 'hello', { chat: { id: 'new', type: 'dm' } }));
    await waitFor(() => (db.prepare('SELECT state FROM inbox').get() as { state: string }).state === 'done');
    expect(spent.adapter.visible('new')).toEqual([expect.stringContaining('daily budget')]);
    await spent.close();
    expect(sessions()).toEqual([]);

    const left = pipeline(`[agent]\nprovider = "echo"\ndaily_budget = 5\n`, '', { db, workspace: { usage: { ledger } } });
    await left.dispatcher.deliver(userMessage('t', 'hello again', { chat: { id: 'new', type: 'dm' } }));
    await waitFor(() => left.adapter.visible('new').join() === 'hello again');
    await left.close();
    expect(sessions()).toEqual([{ scope: 't:new' }]);
    expect(db.prepare('SELECT user_text, assistant_text FROM turns').all()).toEqual([{ user_text: 'hello again', assistant_text: 'hello again' }]);
    db.close();
  });
});
