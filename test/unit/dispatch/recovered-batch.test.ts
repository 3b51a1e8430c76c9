import { describe, expect, it } from 'vitest';
import type { QueueMode } from '../../../src/config/schema.js';
import type { MessageRef } from '../../../src/contracts/message.js';
import type { InboxItem } from '../../../src/inbox/item.js';
import { ItemLifecycle } from '../../../src/inbox/lifecycle.js';
import { Lanes } from '../../../src/dispatch/lanes.js';
import { createLogger } from '../../../src/observe/logger.js';
import { waitFor } from '../../helpers/daemon.js';
import { pipeline } from '../../helpers/pipeline.js';
import { userMessage } from '../../helpers/recording-adapter.js';

// Items recovered after a crash (or handed in again) that a collected turn had answered in one
// reply carry the same reply refs: they start again as one turn, whatever the queue mode.

describe('items of a collected turn run again', () => {
  it.each<[QueueMode, boolean]>([
    ['followup', false],
    ['collect', false],
    ['interrupt', false],
    ['followup', true],
    ['interrupt', true],
  ])('in %s mode (queued one at a time under a hold: %s), start as one turn; the items after them run as before', async (mode, held) => {
    const p = pipeline(`[agent]\nprovider = "echo"\n`);
    const turns: string[][] = [];
    const lanes = new Lanes({
      limits: () => p.config.limits,
      channelLimit: () => undefined,
      execute: async (job) => {
        turns.push(job.items.map((i) => i.message.text));
        return 'done';
      },
      lifecycle: new ItemLifecycle(p.inbox),
      log: createLogger({ level: 'silent' }),
    });
    try {
      const reply: MessageRef[] = [{ chatId: 'chat-1', messageId: 'r1' }];
      const item = (text: string, replyRefs: MessageRef[]): InboxItem => {
        const message = userMessage('t', text);
        return { id: p.inbox.add(message, 't:chat-1')!, scope: 't:chat-1', message, state: 'pending', replyRefs };
      };
      const items = [item('high water?', reply), item('low water?', [...reply.map((r) => ({ ...r }))]), item('and tomorrow?', [])];
      if (held) {
        // Handed in one at a time (a cluster takeover's backlog) while the scope is held.
        const release = lanes.hold('t:chat-1');
        for (const it of items) {
          expect(lanes.accept(it, mode, [])).toBe(true);
          await new Promise((r) => setImmediate(r));
        }
        expect(turns).toEqual([]);
        expect(lanes.snapshot().queued).toBe(3);
        release();
        release();
      } else
        lanes.together(() => {
          for (const it of items) expect(lanes.accept(it, mode, [])).toBe(true);
        });
      await waitFor(() => lanes.snapshot().inFlight === 0 && lanes.snapshot().queued === 0);
      expect(turns).toEqual([['high water?', 'low water?'], ['and tomorrow?']]);
    } finally {
      await p.close();
    }
  });
});
