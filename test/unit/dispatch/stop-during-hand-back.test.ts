import { describe, expect, it } from 'vitest';
import { abortedBy } from '../../../src/contracts/errors.js';
import type { InboxItem } from '../../../src/inbox/item.js';
import { ItemLifecycle } from '../../../src/inbox/lifecycle.js';
import { Lanes, type TurnJob, type TurnRunEnding } from '../../../src/dispatch/lanes.js';
import { createLogger } from '../../../src/observe/logger.js';
import { waitFor } from '../../helpers/daemon.js';
import { pipeline } from '../../helpers/pipeline.js';
import { userMessage } from '../../helpers/recording-adapter.js';

describe('a /stop while a hand-back past its grace has already cut the turn (cluster)', () => {
  it('the turn, still delivering its final text, is recorded stopped: not left for the next owner to answer in full', async () => {
    const p = pipeline(`[agent]\nprovider = "echo"\n`);
    const ends: string[] = [];
    let cut!: () => void;
    const cutSeen = new Promise<void>((r) => (cut = r));
    let delivered!: () => void;
    const delivering = new Promise<void>((r) => (delivered = r));
    // As the executor does: a turn cut by the hand-back ends its answer (the stop marker goes
    // out) and reports it unfinished, so that the partition's next owner runs it again.
    const execute = async (_job: TurnJob, signal: AbortSignal): Promise<TurnRunEnding> => {
      await new Promise<void>((r) => signal.addEventListener('abort', () => r(), { once: true }));
      expect(abortedBy(signal, 'CLUSTER_LEASE_LOST')).toBe(true);
      cut();
      await delivering;
      return 'unfinished';
    };
    const lanes = new Lanes({
      limits: () => p.config.limits,
      channelLimit: () => undefined,
      execute,
      lifecycle: new ItemLifecycle(p.inbox, [{ finished: (_items, state) => ends.push(`finished ${state}`), interrupted: () => ends.push('interrupted') }]),
      log: createLogger({ level: 'silent' }),
    });
    try {
      const message = userMessage('t', 'a long answer');
      const item: InboxItem = { id: p.inbox.add(message, 't:chat-1')!, scope: 't:chat-1', message, state: 'pending', replyRefs: [] };
      expect(lanes.accept(item, 'followup', [])).toBe(true);
      await waitFor(() => lanes.snapshot().inFlight === 1);
      // The hand-back's grace ran out: the running turn is cut at once.
      let released = false;
      const release = lanes.release(() => true, 0, new AbortController().signal).then(() => (released = true));
      await cutSeen;
      // The user's /stop comes while that turn still delivers its final text.
      expect(lanes.stopOf('t:chat-1', message.sender.id, 'stopped by /stop')).toEqual({ cancelled: true, dropped: 0 });
      expect(released).toBe(false);
      delivered();
      await release;
      // Before, the turn was left unfinished (nothing written) and the next owner answered it in full.
      expect(ends).toEqual(['finished failed']);
      expect(p.db.prepare('SELECT state, error FROM inbox WHERE id = ?').get(item.id)).toEqual({ state: 'failed', error: 'cancelled' });
    } finally {
      await p.close();
    }
  });
});
