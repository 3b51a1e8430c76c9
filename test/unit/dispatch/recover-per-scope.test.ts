import { describe, expect, it } from 'vitest';
import { waitFor } from '../../helpers/daemon.js';
import { withPipeline, type Pipeline } from '../../helpers/pipeline.js';
import { userMessage } from '../../helpers/recording-adapter.js';

const echo = `[agent]\nprovider = "echo"\necho_delay_ms = 20\n`;
const states = (p: Pipeline) => (p.db.prepare('SELECT state FROM inbox ORDER BY id').all() as { state: string }[]).map((r) => r.state);

/** Two items a collected turn had answered in one reply (their shared draft), stored unfinished in chat c. */
async function collectedBatch(p: Pipeline) {
  const draft = await p.adapter.send({ channelId: 't', chatId: 'c', chatType: 'dm' }, 'high');
  for (const [text, messageId] of [
    ['high water?', 'm1'],
    ['low water?', 'm2'],
  ] as const) {
    const id = p.inbox.add(userMessage('t', text, { messageId, chat: { id: 'c', type: 'dm' } }), 't:c', 'running')!;
    p.inbox.setReplyRefs(id, [draft]);
  }
  return draft;
}

describe('items found in the inbox again are queued scope by scope', () => {
  it('on start-up, more unfinished scopes than max_queued all run: turns start while the rest is queued', async () => {
    const p = withPipeline(`${echo}\n[limits]\nmax_in_flight = 2\nmax_queued = 2\n`);
    for (const chat of ['a', 'b', 'c', 'd']) {
      const id = p.inbox.add(userMessage('t', `in ${chat}`, { chat: { id: chat, type: 'dm' } }), `t:${chat}`, 'running')!;
      // Two of them ran before (a draft was sent): their scopes' items are gathered before they start.
      if (chat === 'a' || chat === 'c') p.inbox.setReplyRefs(id, [await p.adapter.send({ channelId: 't', chatId: chat, chatType: 'dm' }, 'in')]);
    }
    expect(p.dispatcher.recover()).toBe(4);
    await waitFor(() => states(p).every((s) => s === 'done'), 5000);
    for (const chat of ['a', 'b', 'c', 'd']) expect(p.adapter.visible(chat)).toEqual([`in ${chat}`]);
  });

  it('a failed upgrade (recoverUnheld): a collected turn’s items run again as one, in their one reply', async () => {
    const p = withPipeline(echo);
    p.dispatcher.trackAdmissions();
    const draft = await collectedBatch(p);
    expect(p.dispatcher.recoverUnheld()).toBe(2);
    await waitFor(() => states(p).every((s) => s === 'done'), 5000);
    expect(p.adapter.texts.get(draft.messageId)).toBe('high water?\n\nlow water?');
    expect(p.adapter.visible('c')).toEqual(['high water?\n\nlow water?']);
  });

  it('an upgrade (resumeTurns): a collected turn’s items run again as one, in their one reply', async () => {
    const p = withPipeline(echo);
    p.dispatcher.deferTurns();
    const draft = await collectedBatch(p);
    expect(p.dispatcher.resumeTurns(new Set(), true)).toBe(2);
    await waitFor(() => states(p).every((s) => s === 'done'), 5000);
    expect(p.adapter.texts.get(draft.messageId)).toBe('high water?\n\nlow water?');
    expect(p.adapter.visible('c')).toEqual(['high water?\n\nlow water?']);
  });
});
